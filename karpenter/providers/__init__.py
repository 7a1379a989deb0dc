"""Cloud providers: each one a vertical slice plugged into the core through the CloudProvider port.

A provider lives in one folder (``providers/<name>/``) with the same layers inside as the
project has outside: its API models, its pure decisions, its SDK adapter, its controllers and
its wiring. The core and the shell never import a provider; ``registry`` is the one place that
names them (``karpenter run --cloud-provider`` and the ``simulate`` catalog presets).
"""
