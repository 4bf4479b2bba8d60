"""A small knowledge-graph embedding toolkit."""
