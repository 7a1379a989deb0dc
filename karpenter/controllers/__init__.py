"""Controllers: thin loops that snapshot state, call the core or the cloud, and write the result."""
