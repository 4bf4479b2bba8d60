"""A small Transformer for a toy translation task."""
