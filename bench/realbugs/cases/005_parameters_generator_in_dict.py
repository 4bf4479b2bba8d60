# Source: https://github.com/pytorch/pytorch/issues/110357
# Category: params-generator-exhausted
# Expect: raises ValueError: optimizer got an empty parameter list
"""A module's `parameters()` is stored in a dict and iterated twice; the second pass sees nothing
because it is a one-shot generator (here the second pass is the optimizer)."""
import torch
import torch.nn as nn

torch.manual_seed(0)


class MyModule(nn.Module):
    def __init__(self):
        super().__init__()
        param = torch.rand(2, 2)
        self.register_parameter("param", nn.Parameter(param))

    def forward(self, x):
        return x @ self.param


mymodule = MyModule()
mydict = dict(param=mymodule.parameters(), lr=0.1)  # BUG: params-generator-exhausted

print("Parameters to optimize:")
for param in mydict["param"]:
    print(tuple(param.shape), param.requires_grad)

optimizer = torch.optim.SGD(mydict["param"], lr=mydict["lr"])
x, target = torch.randn(8, 2), torch.randn(8, 2)
for step in range(3):
    optimizer.zero_grad()
    loss = ((mymodule(x) - target) ** 2).mean()
    loss.backward()
    optimizer.step()
print("trained")
