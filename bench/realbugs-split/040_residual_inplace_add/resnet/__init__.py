"""Residual network building blocks."""
from .units import ResidualUnitA

__all__ = ["ResidualUnitA"]
