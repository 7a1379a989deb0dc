"""`karpenter explain`: why a pod or node is where it is, from the controller's core."""
