"""The custom autograd Function and its functional wrapper."""
import torch


class CustomOp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x *= 2.0  # BUG: function-mutates-input
        return x

    @staticmethod
    def backward(ctx, grad_output):
        print("Running in backward...")
        grad_output *= 2.0  # BUG: function-mutates-grad-output
        return grad_output


def custom_op(x):
    return CustomOp.apply(x)
