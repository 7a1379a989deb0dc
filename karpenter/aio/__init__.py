"""Domain-free async kits for the shell: the injectable clock and friends."""
