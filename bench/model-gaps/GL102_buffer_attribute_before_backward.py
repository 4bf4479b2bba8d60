"""Fixture gap from GL102_inplace_on_saved_output.py: bad_buffer_attribute_changed_before_backward -- bad (gradlint should report the marked line).

Missed: the module's forward() computes self.fc(x) * self.scale (mul saves the buffer self.scale to compute fc's gradient); model.scale.mul_(0.5) between the forward and backward() makes backward() raise 'modified by an inplace operation'. gradlint does not carry 'saved by mul in forward()' to the module attribute model.scale.

Run: python3 GL102_buffer_attribute_before_backward.py   (shows what torch does);  gradlint check --no-cache GL102_buffer_attribute_before_backward.py
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from gradlint.testing import raises
MODIFIED = "modified by an inplace operation"


class _Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 3)
        self.register_buffer("scale", torch.ones(3))

    def forward(self, x):
        return self.fc(x) * self.scale


@raises(RuntimeError, MODIFIED)
def bad_buffer_attribute_changed_before_backward():
    model = _Scaled()
    out = model(torch.randn(4, 3))
    model.scale.mul_(0.5)  # error: GL102
    out.sum().backward()


if __name__ == "__main__":
    import traceback
    try:
        print("result:", bad_buffer_attribute_changed_before_backward())
    except Exception:
        traceback.print_exc()
