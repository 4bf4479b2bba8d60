"""Fixture gap from GL204_tensor_copy_construct.py: bad_module_attribute_buffer_copied -- bad (gradlint should report the marked line).

Missed: torch.tensor(model.mean) where mean is a buffer registered with self.register_buffer('mean', torch.zeros(3)) in the nn.Module subclass; torch warns 'To copy construct from a tensor'. gradlint reports torch.tensor(model.fc.weight) (a parameter) but not a registered buffer.

Run: python3 GL204_module_buffer_attribute.py   (shows what torch does);  gradlint check --no-cache GL204_module_buffer_attribute.py
"""
import torch
import torch.nn as nn
from gradlint.testing import silently_wrong, warns
COPY = "To copy construct from a tensor"


class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 1)
        self.register_buffer("mean", torch.zeros(3))

    def forward(self, x):
        return self.fc(x - self.mean)


@warns(UserWarning, COPY)
def bad_module_attribute_buffer_copied():
    model = _Net()
    return torch.tensor(model.mean)  # warning: GL204


if __name__ == "__main__":
    import traceback
    try:
        print("result:", bad_module_attribute_buffer_copied())
    except Exception:
        traceback.print_exc()
