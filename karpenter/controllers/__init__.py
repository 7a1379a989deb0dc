"""Controllers: thin loops that snapshot state, call the core or the cloud, write the result."""
