"""The custom autograd Function and its functional wrapper."""
import torch

calls = []


class CustomOp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2.0

    @staticmethod
    def backward(ctx, grad_output):
        calls.append(1)
        return grad_output * 2.0


def custom_op(x):
    return CustomOp.apply(x)
