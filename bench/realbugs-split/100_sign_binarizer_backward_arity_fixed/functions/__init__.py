"""Custom autograd functions."""
from .sign import Sign
