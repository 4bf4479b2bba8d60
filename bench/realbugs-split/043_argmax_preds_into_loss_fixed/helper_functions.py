"""Metrics used by the training script."""


def accuracy_fn(y_true, y_pred):
    return (y_true == y_pred).float().mean().item() * 100
