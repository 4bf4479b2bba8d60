"""Single-cell variational inference."""
