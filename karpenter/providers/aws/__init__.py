"""The AWS provider: EC2NodeClass API, pure decisions, SDK adapter, controllers and wiring."""
