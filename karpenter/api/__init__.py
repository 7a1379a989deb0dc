"""API boundary: CRD models (pydantic) and converters from Kubernetes objects to core values."""
