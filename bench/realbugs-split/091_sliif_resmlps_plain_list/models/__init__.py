"""Implicit image function models."""
