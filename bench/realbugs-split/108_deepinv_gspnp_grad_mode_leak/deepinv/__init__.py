"""Inverse problems with deep learning."""
from . import models
