"""The EC2NodeClass API: pydantic CRD models, status documents and the kubelet CEL engine."""
