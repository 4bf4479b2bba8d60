# Source: https://discuss.pytorch.org/t/trying-to-understand-why-output-of-nn-linear-for-output-layer-isnt-retaining/40116
# Category: non-leaf-grad-read
# Expect: ok
"""Fixed twin: retain_grad() is called on the non-leaf output before backward, so its .grad
is populated (and equals dloss/dout)."""
import torch
import torch.nn as nn

torch.manual_seed(0)
device = torch.device("cpu")
args = {'device': device, 'dtype': torch.float}


class SingleRNN(nn.Module):
    def __init__(self, n_inputs, n_outputsize):
        super(SingleRNN, self).__init__()
        numHU = 2
        bias = False
        self.Wxh = nn.Linear(in_features=n_inputs, out_features=numHU, bias=bias)
        self.Whh = nn.Linear(in_features=numHU + self.Wxh.out_features, out_features=numHU, bias=bias)
        self.Why = nn.Linear(in_features=numHU, out_features=n_outputsize, bias=bias)

    def forward(self, X0, H0):
        self.L0_X = self.Wxh(X0)
        self.L1_H = self.Whh(torch.cat((self.L0_X, H0), dim=1))
        self.L2_Y = self.Why(self.L1_H)
        return self.L2_Y


model = SingleRNN(n_inputs=3, n_outputsize=1).to(device)
X0 = torch.randn(4, 3, **args)
H0 = torch.zeros(4, 2, **args)
target = torch.randn(4, 1, **args)

out = model(X0, H0)
model.L2_Y.retain_grad()
loss = ((out - target) ** 2).mean()
loss.backward()
print("Why.weight.grad", model.Why.weight.grad)
output_grad = model.L2_Y.grad
assert output_grad is not None
assert torch.allclose(output_grad, 2 * (out.detach() - target) / out.numel())
print("gradient of the output layer's result", output_grad.flatten())
