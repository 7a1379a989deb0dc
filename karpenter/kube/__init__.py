"""The apiserver's edge: the only package that speaks to Kubernetes (HTTP through aiohttp)."""
