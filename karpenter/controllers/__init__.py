"""Controllers: thin loops that snapshot state, call the core, and write the result."""
