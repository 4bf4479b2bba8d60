"""Fixture gap from GL205_loss_rewrap.py: bad_module_attribute_head_output_rewrapped -- bad (gradlint should report the marked line).

Missed: loss = torch.tensor(nn.functional.mse_loss(model.head(x), y).item(), requires_grad=True) (the loss computed and re-wrapped in one expression, through the module attribute model.head); loss.backward() leaves model.head.weight.grad None. gradlint reports the two-statement form (loss = mse(...); loss = torch.tensor(loss.item(), requires_grad=True)) but not this one.

Run: python3 GL205_nested_rewrap_module_attribute.py   (shows what torch does);  gradlint check --no-cache GL205_nested_rewrap_module_attribute.py
"""
import torch
import torch.nn as nn
from gradlint.testing import silently_wrong


class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.encoder = nn.Linear(3, 3)
        self.head = nn.Linear(3, 1)

    def forward(self, x):
        return self.head(torch.relu(self.encoder(x)))


@silently_wrong
def bad_module_attribute_head_output_rewrapped():
    model = _Net()
    x, y = torch.randn(4, 3), torch.randn(4, 1)
    loss = torch.tensor(nn.functional.mse_loss(model.head(x), y).item(), requires_grad=True)
    loss.backward()  # error: GL205
    return model.head.weight.grad, "a gradient"


if __name__ == "__main__":
    import traceback
    try:
        print("result:", bad_module_attribute_head_output_rewrapped())
    except Exception:
        traceback.print_exc()
