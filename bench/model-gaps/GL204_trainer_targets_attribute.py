"""Fixture gap from GL204_tensor_copy_construct.py: bad_trainer_state_set_in_setup -- bad (gradlint should report the marked line).

Missed: setup() sets self.targets = torch.randn(4, 1); fit() does torch.tensor(self.targets) in the loop and torch warns 'To copy construct from a tensor'. gradlint does not see the attribute set outside __init__ as a tensor.

Run: python3 GL204_trainer_targets_attribute.py   (shows what torch does);  gradlint check --no-cache GL204_trainer_targets_attribute.py
"""
import torch
import torch.nn as nn
from gradlint.testing import silently_wrong, warns
COPY = "To copy construct from a tensor"


class _TargetTrainer:
    def setup(self):
        torch.manual_seed(0)
        self.model = nn.Linear(3, 1)
        self.targets = torch.randn(4, 1)

    def fit(self, x, epochs):
        for _ in range(epochs):
            y = torch.tensor(self.targets)  # warning: GL204
            nn.functional.mse_loss(self.model(x), y).backward()


@warns(UserWarning, COPY)
def bad_trainer_state_set_in_setup():
    trainer = _TargetTrainer()
    trainer.setup()
    trainer.fit(torch.randn(4, 3), 2)


if __name__ == "__main__":
    import traceback
    try:
        print("result:", bad_trainer_state_set_in_setup())
    except Exception:
        traceback.print_exc()
