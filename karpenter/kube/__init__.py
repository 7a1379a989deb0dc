"""The only package that talks to the Kubernetes SDK (kubernetes_asyncio)."""
