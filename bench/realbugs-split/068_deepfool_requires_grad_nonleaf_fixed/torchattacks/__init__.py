"""Adversarial attacks."""
from .attack import Attack
from .deepfool import DeepFool
