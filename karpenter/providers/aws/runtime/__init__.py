"""The AWS provider bound to a cluster: its kube-side views, its services and their composition."""
