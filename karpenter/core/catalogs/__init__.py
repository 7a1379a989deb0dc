"""Built-in instance-type catalogs of the simulated cloud (pure data generators)."""
