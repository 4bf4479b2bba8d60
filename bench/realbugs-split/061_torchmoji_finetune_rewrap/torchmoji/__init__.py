"""torchMoji: a pretrained emoji-prediction model and its fine-tuning helpers."""
