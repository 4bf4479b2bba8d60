# Source: https://github.com/pytorch/pytorch/issues/1339
# Category: nondifferentiable-op
# Expect: raises AttributeError: 'NoneType' object has no attribute 'data'
"""The output of a first module is turned into hard class indices with `torch.max(y_p, 1)[1]` and
fed to a second module; the reporter expects gradients to reach the first module's weights, but the
integer indices cut the graph and printing their grads fails."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
num_classes = 5

first_model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, num_classes))
second_model = nn.Sequential(nn.Linear(num_classes, 16), nn.ReLU(), nn.Linear(16, 1))
criterion = nn.MSELoss()

x, target = torch.randn(24, 10), torch.randn(24, 1)
y_p = first_model(x)
y_p = torch.max(y_p, 1)[1]  # BUG: nondifferentiable-op
y_p = F.one_hot(y_p, num_classes).float()  # BUG: nondifferentiable-op
loss = criterion(second_model(y_p), target)

first_model.zero_grad()
second_model.zero_grad()
loss.backward()

for param in second_model.parameters():
    print("second grad norm", param.grad.data.norm().item())
for param in first_model.parameters():
    print("first grad norm", param.grad.data.norm().item())
