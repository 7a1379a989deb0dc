"""Controllers: thin reconcile loops over the core and the cloud provider."""
