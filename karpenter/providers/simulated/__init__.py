"""The simulated (kwok-like) cloud: the smallest provider, a sandbox that needs no cloud account."""
