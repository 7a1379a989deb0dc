"""The Kubernetes adapter: the only package that imports kubernetes_asyncio."""
