"""The AWS provider's pure parts: instance types, prices, user data, interruption messages."""
