"""End-to-end tests against a real local control plane (etcd, apiserver, scheduler)."""
