"""Autograd functions."""
from torch.autograd import Function


class Sign(Function):
    """Variable Rate Image Compression with Recurrent Neural Networks (stochastic binarization)."""

    @staticmethod
    def forward(ctx, input, is_training=True):
        # quantization noise only while training
        if is_training:
            prob = input.new(input.size()).uniform_()
            x = input.clone()
            x[(1 - input) / 2 <= prob] = 1
            x[(1 - input) / 2 > prob] = -1
            return x
        return input.sign()

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output  # BUG: function-backward-arity
