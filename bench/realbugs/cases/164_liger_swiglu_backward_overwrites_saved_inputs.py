# Source: https://github.com/linkedin/Liger-Kernel/issues/254
# Category: function-backward-mutates-saved
# Expect: silent: the fused SwiGLU Function's backward writes its input gradients into the saved forward inputs in place, and the upstream custom Exponential saved the same tensor (its output) for its own backward, so the gradient reaching x is computed from overwritten values and is wrong
"""Liger's SwiGLU kernel saves its inputs a and b and, to save memory, its backward writes da and db into those
very buffers. The issue points out that a preceding custom Function that saved its *output* (an Exponential
saving exp(x)) hands SwiGLU that same tensor, so by the time the Exponential's backward runs its saved output
holds SwiGLU's gradient instead of exp(x). Autograd cannot see this: the Triton kernel writes through raw
pointers, which bump no version counter (the reduction writes through `.data` for the same effect), so no
in-place check fires. The reduction computes the kernel in PyTorch and compares with plain autograd."""
import torch
import torch.nn.functional as F

torch.manual_seed(0)


class Exponential(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        out = torch.exp(x)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad_out):
        (out,) = ctx.saved_tensors
        return grad_out * out


def swiglu_backward(a, b, dc):
    sig_a = torch.sigmoid(a)
    silu_a = a * sig_a
    db = dc * silu_a
    da = dc * (silu_a * (1 - sig_a) + sig_a) * b
    a.data.copy_(da)  # BUG: function-backward-mutates-saved
    b.data.copy_(db)  # BUG: function-backward-mutates-saved
    return a, b


class LigerSiLUMulFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        c = F.silu(a) * b
        ctx.save_for_backward(a, b)
        return c

    @staticmethod
    def backward(ctx, dc):
        a, b = ctx.saved_tensors
        with torch.no_grad():
            a, b = swiglu_backward(a, b, dc)
        return a, b


x = torch.randn(4, 6, requires_grad=True)
x_exp = Exponential.apply(x)
LigerSiLUMulFunction.apply(x_exp, x_exp).sum().backward()
liger_grad = x.grad.clone()

x_ref = x.detach().clone().requires_grad_(True)
e = torch.exp(x_ref)
(F.silu(e) * e).sum().backward()
err = (liger_grad - x_ref.grad).abs().max().item()
print("largest gradient error against plain autograd:", err)
assert err > 1e-3
print("EVIDENCE: the gradient of x through Exponential -> SwiGLU is off by up to", f"{err:.3g}")
