"""Multitask optimisation methods."""
