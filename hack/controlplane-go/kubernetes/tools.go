//go:build tools

// Package tools only exists so `go mod tidy` keeps every package that the
// control-plane commands need in go.mod/go.sum; nothing here is compiled.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver/app"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	_ "k8s.io/kubernetes/cmd/kube-scheduler/app"
)
