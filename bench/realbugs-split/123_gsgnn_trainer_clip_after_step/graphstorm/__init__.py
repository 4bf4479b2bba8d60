"""Graph machine learning at scale."""
