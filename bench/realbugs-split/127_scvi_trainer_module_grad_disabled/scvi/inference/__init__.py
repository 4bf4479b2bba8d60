"""Training and evaluation of the models."""
from .trainer import Trainer, UnsupervisedTrainer
