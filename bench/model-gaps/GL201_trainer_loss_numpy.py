"""Fixture gap from GL201_numpy_on_graph_tensor.py: bad_trainer_state_set_in_setup -- bad (gradlint should report the marked line).

Missed: setup() sets self.w = torch.randn(3, requires_grad=True); fit() computes loss = ((x @ self.w) ** 2).mean() and calls loss.numpy() after backward(): loss requires grad and torch raises "Can't call numpy() on Tensor that requires grad". gradlint does not report it. A probe shows a tensor attribute self.w = torch.randn(..., requires_grad=True) is not seen as requiring grad in another method even when set in __init__ (nn.Module attributes such as self.model = nn.Linear(...) are).

Run: python3 GL201_trainer_loss_numpy.py   (shows what torch does);  gradlint check --no-cache GL201_trainer_loss_numpy.py
"""
import numpy as np
import torch
import torch.nn as nn
from gradlint.testing import raises, silently_wrong
NUMPY = "Can't call numpy() on Tensor that requires grad"


class _LoggingTrainer:
    def setup(self):
        torch.manual_seed(0)
        self.w = torch.randn(3, requires_grad=True)
        self.history = []

    def fit(self, x, epochs):
        for _ in range(epochs):
            loss = ((x @ self.w) ** 2).mean()
            loss.backward()
            self.history.append(loss.numpy())  # error: GL201


@raises(RuntimeError, NUMPY)
def bad_trainer_state_set_in_setup():
    trainer = _LoggingTrainer()
    trainer.setup()
    trainer.fit(torch.randn(4, 3), 2)


if __name__ == "__main__":
    import traceback
    try:
        print("result:", bad_trainer_state_set_in_setup())
    except Exception:
        traceback.print_exc()
