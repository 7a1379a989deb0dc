"""The AWS-only controllers, each written against the small Protocols it needs."""
