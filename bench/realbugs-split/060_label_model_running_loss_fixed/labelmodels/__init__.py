"""Label models for weak supervision."""
from .label_model import LearningConfig
from .naive_bayes import NaiveBayes
