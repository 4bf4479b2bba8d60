"""Fixture gap from GL103_inplace_through_data.py: bad_head_weight_data_changed_before_backward -- bad (gradlint should report the marked line).

Missed: model.head.weight was saved by the head's Linear in forward() (its input, the encoder's ReLU output, requires grad, so addmm saves the weight to compute that input's gradient); model.head.weight.data.mul_(0.5) between the forward and loss.backward() silently halves every encoder gradient. gradlint does not know that an nn.Linear inside a walked forward() saved its weight.

Run: python3 GL103_module_attribute_head_weight_data.py   (shows what torch does);  gradlint check --no-cache GL103_module_attribute_head_weight_data.py
"""
import torch
import torch.nn as nn
from gradlint.testing import silently_wrong


class _MLP(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.encoder = nn.Linear(3, 3)
        self.head = nn.Linear(3, 1)

    def forward(self, x):
        return self.head(torch.relu(self.encoder(x)))


@silently_wrong
def bad_head_weight_data_changed_before_backward():
    x = torch.ones(4, 3)
    model = _MLP()
    loss = model(x).sum()
    model.head.weight.data.mul_(0.5)  # error: GL103
    loss.backward()
    reference = _MLP()
    reference(x).sum().backward()
    return model.encoder.weight.grad, reference.encoder.weight.grad


if __name__ == "__main__":
    import traceback
    try:
        print("result:", bad_head_weight_data_changed_before_backward())
    except Exception:
        traceback.print_exc()
