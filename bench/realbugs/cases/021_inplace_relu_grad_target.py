# Source: https://discuss.pytorch.org/t/understanding-autograd-relu-inplace-true/89031
# Category: grad-target-modified-inplace
# Expect: silent: the gradient w.r.t. x is all ones instead of the ReLU mask, because x itself was overwritten in place
"""Testing a ResNet-style helper that adds residuals and applies ReLU in place, the reporter asked
autograd for d(out)/d(x) on the very tensor the helper modified, and got 1 where 0 was expected."""
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


x = torch.randn(3, 4).requires_grad_().clone()  # BUG: grad-target-modified-inplace
x0 = x.detach().clone()
residual = [torch.randn(3, 4), torch.randn(3, 4)]
y = residual_activation_inplace(x, residual, F.relu, inplace=True)  # BUG: grad-target-modified-inplace
(grad_x,) = torch.autograd.grad(y.sum(), (x,))

expected = reference_grad(x0, residual)
assert (expected == 0).any()
assert torch.equal(grad_x, torch.ones_like(grad_x))
assert not torch.equal(grad_x, expected)
print("EVIDENCE: grad w.r.t. the in-place-modified x is all ones; the ReLU mask has",
      int((expected == 0).sum()), "zeros")
