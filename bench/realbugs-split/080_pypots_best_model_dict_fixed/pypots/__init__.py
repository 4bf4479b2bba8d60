"""Imputation of partially observed time series."""
from .base import BaseNNModel

__all__ = ["BaseNNModel"]
