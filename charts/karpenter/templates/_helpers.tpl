{{/* The chart's short name. */}}
{{- define "karpenter.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The fullname of every object (63 characters at most, a DNS label). */}}
{{- define "karpenter.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "karpenter.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels on every object. */}}
{{- define "karpenter.labels" -}}
helm.sh/chart: {{ include "karpenter.chart" . }}
{{ include "karpenter.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.additionalLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Labels that select the controller's pods (immutable once deployed). */}}
{{- define "karpenter.selectorLabels" -}}
app.kubernetes.io/name: {{ include "karpenter.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "karpenter.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "karpenter.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The controller image: a digest wins over a tag; the tag defaults to appVersion. */}}
{{- define "karpenter.image" -}}
{{- $image := .Values.controller.image -}}
{{- if $image.digest }}
{{- printf "%s@%s" $image.repository $image.digest }}
{{- else }}
{{- printf "%s:%s" $image.repository (default .Chart.AppVersion $image.tag) }}
{{- end }}
{{- end }}

{{/* FEATURE_GATES as upstream spells it: Name=bool pairs, comma-separated. */}}
{{- define "karpenter.featureGates" -}}
{{- $gates := list }}
{{- range $name, $on := .Values.settings.featureGates }}
{{- $gates = append $gates (printf "%s=%t" (title $name) $on) }}
{{- end }}
{{- join "," $gates }}
{{- end }}

{{/* AWS_FEATURE_GATES: the same format; nodeClassCEL → NodeClassCEL. */}}
{{- define "karpenter.awsFeatureGates" -}}
{{- $gates := list }}
{{- range $name, $on := .Values.settings.awsFeatureGates }}
{{- $gates = append $gates (printf "%s%s=%t" (upper (substr 0 1 $name)) (substr 1 -1 $name) $on) }}
{{- end }}
{{- join "," $gates }}
{{- end }}

{{/* The lease the replicas campaign for (upstream's name). */}}
{{- define "karpenter.leaderElectionName" -}}
karpenter-leader-election
{{- end }}
