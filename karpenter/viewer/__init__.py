"""`karpenter viewer`: a live terminal view of nodes, prices, utilisation and pending pods."""
