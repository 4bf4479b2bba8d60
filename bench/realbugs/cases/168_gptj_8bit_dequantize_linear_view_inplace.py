# Source: https://github.com/gustavecortal/gpt-j-fine-tuning-example/issues/1
# Category: view-inplace-forbidden
# Expect: raises RuntimeError: This view was created inside a custom Function
"""The 8-bit GPT-J fine-tuning example runs its frozen quantized linears through a custom Function
(DequantizeAndLinear: dequantize the weight, F.linear) and adds the LoRA adapter's output to the result in place
(`output += self.adapter(input)`). For a 3-d input F.linear returns a view, so the Function's output is a view
created inside a custom Function, and modifying it in place is forbidden. The fix in the thread returns
`F.linear(...).clone()` from forward."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


def dequantize_blockwise(weight_q, absmax):
    return weight_q.float() * (absmax / 127)


class DequantizeAndLinear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input, weights_quantized, absmax, bias):
        weights_deq = dequantize_blockwise(weights_quantized, absmax)
        ctx.save_for_backward(input, weights_quantized, absmax)
        ctx._has_bias = bias is not None
        return F.linear(input, weights_deq, bias)  # BUG: view-inplace-forbidden

    @staticmethod
    def backward(ctx, grad_output):
        input, weights_quantized, absmax = ctx.saved_tensors
        weights_deq = dequantize_blockwise(weights_quantized, absmax)
        grad_input = grad_output @ weights_deq
        grad_bias = grad_output.flatten(0, -2).sum(dim=0) if ctx._has_bias else None
        return grad_input, None, None, grad_bias


class FrozenBNBLinear(nn.Module):
    def __init__(self, weight, absmax, bias=None):
        super().__init__()
        self.out_features, self.in_features = weight.shape
        self.register_buffer("weight", weight.requires_grad_(False))
        self.register_buffer("absmax", absmax.requires_grad_(False))
        self.bias = bias
        self.adapter = None

    def forward(self, input):
        output = DequantizeAndLinear.apply(input, self.weight, self.absmax, self.bias)
        if self.adapter:
            output += self.adapter(input)
        return output

    @classmethod
    def from_linear(cls, linear):
        absmax = linear.weight.abs().max().detach()
        weight_q = torch.round(linear.weight.detach() / absmax * 127).to(torch.int8)
        return cls(weight_q, absmax, linear.bias)


def add_adapters(model, adapter_dim=4):
    for module in model.modules():
        if isinstance(module, FrozenBNBLinear):
            module.adapter = nn.Sequential(nn.Linear(module.in_features, adapter_dim, bias=False),
                                           nn.Linear(adapter_dim, module.out_features, bias=False))
            nn.init.zeros_(module.adapter[1].weight)


class GPTJBlock(nn.Module):
    def __init__(self, dim=16):
        super().__init__()
        self.ln = nn.LayerNorm(dim)
        self.q_proj = FrozenBNBLinear.from_linear(nn.Linear(dim, dim))
        self.fc_out = FrozenBNBLinear.from_linear(nn.Linear(dim, dim))

    def forward(self, x):
        return x + self.fc_out(F.gelu(self.q_proj(self.ln(x))))


block = GPTJBlock()
add_adapters(block)
optimizer = torch.optim.Adam([p for p in block.parameters() if p.requires_grad], lr=1e-4)
x = torch.randn(2, 5, 16)
loss = block(x).pow(2).mean()
loss.backward()
optimizer.step()
