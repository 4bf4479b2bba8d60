# Source: https://github.com/pytorch/pytorch/issues/110357
# Category: params-generator-exhausted
# Expect: ok
"""The same setup with the parameters materialised into a list before they are stored, so both the
logging pass and the optimizer see them."""
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
mydict = dict(param=list(mymodule.parameters()), lr=0.1)

print("Parameters to optimize:")
for param in mydict["param"]:
    print(tuple(param.shape), param.requires_grad)

optimizer = torch.optim.SGD(mydict["param"], lr=mydict["lr"])
before = mymodule.param.detach().clone()
x, target = torch.randn(8, 2), torch.randn(8, 2)
for step in range(3):
    optimizer.zero_grad()
    loss = ((mymodule(x) - target) ** 2).mean()
    loss.backward()
    optimizer.step()
assert len(optimizer.param_groups[0]["params"]) == 1
assert not torch.equal(before, mymodule.param.detach())
print("trained")
