"""Cloud providers: the CloudProvider port and its implementations (simulated, AWS)."""
