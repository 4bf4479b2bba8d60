# Source: https://discuss.pytorch.org/t/understanding-autograd-relu-inplace-true/89031
# Category: grad-target-modified-inplace
# Expect: ok
"""Fixed twin: keep a handle on the input before the in-place helper runs (pass it a clone) and take
the gradient w.r.t. that untouched tensor."""
import torch
import torch.nn.functional as F

torch.manual_seed(0)


def residual_activation_inplace(x, residual, activation, inplace):
    for r in residual:
        x += r
    return activation(x, inplace=inplace)


def reference_grad(x0, residual):
    pre = x0 + sum(residual)
    return (pre > 0).to(x0.dtype)


x = torch.randn(3, 4).requires_grad_()
x0 = x.detach().clone()
residual = [torch.randn(3, 4), torch.randn(3, 4)]
y = residual_activation_inplace(x.clone(), residual, F.relu, inplace=True)
(grad_x,) = torch.autograd.grad(y.sum(), (x,))

expected = reference_grad(x0, residual)
assert torch.equal(grad_x, expected)
print("grad matches the ReLU mask")
