"""Custom operators and the model that uses them."""
