"""dpaudit attacks: DP-SGD training with canaries, and membership-inference and reconstruction games."""
