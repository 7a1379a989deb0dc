"""`karpenter simulate`: the offline face of the decision core (fully synchronous)."""
