"""Keyword spotting."""
