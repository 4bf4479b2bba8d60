"""Self-supervised monocular depth estimation."""
