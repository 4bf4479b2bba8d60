# Source: https://github.com/1zb/pytorch-image-comp-rnn/issues/4
# Category: function-backward-arity
# Expect: ok
"""RNN image compression: the stochastic binarizer is a custom autograd Function whose forward takes
(input, is_training) but whose straight-through backward returns only one gradient; the user's first
loss.backward() died with "SignBackward returned an incorrect number of gradients"."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd import Function

torch.manual_seed(0)


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
        return grad_output, None


class EncoderCell(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 16, kernel_size=3, stride=2, padding=1, bias=False)
        self.conv2 = nn.Conv2d(16, 32, kernel_size=3, stride=2, padding=1, bias=False)

    def forward(self, input):
        x = F.relu(self.conv(input))
        return F.relu(self.conv2(x))


class Binarizer(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(32, 8, kernel_size=1, bias=False)

    def forward(self, input):
        feat = self.conv(input)
        x = torch.tanh(feat)
        return Sign.apply(x, self.training)


class DecoderCell(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(8, 48, kernel_size=1, bias=False)
        self.conv2 = nn.Conv2d(3, 3, kernel_size=1, bias=False)

    def forward(self, input):
        x = self.conv1(input)
        x = F.pixel_shuffle(x, 4)
        return torch.tanh(self.conv2(x)) / 2


encoder, binarizer, decoder = EncoderCell(), Binarizer(), DecoderCell()
solver = torch.optim.Adam(
    [{"params": encoder.parameters()}, {"params": binarizer.parameters()}, {"params": decoder.parameters()}], lr=5e-4)

iterations = 4
for batch in range(2):
    data = torch.rand(2, 3, 16, 16) - 0.5
    solver.zero_grad()
    losses = []
    res = data
    for _ in range(iterations):
        encoded = encoder(res)
        codes = binarizer(encoded)
        output = decoder(codes)
        res = res - output
        losses.append(res.abs().mean())
    loss = sum(losses) / iterations
    loss.backward()
    solver.step()
    print("batch", batch, "loss %.4f" % loss.item())

assert encoder.conv.weight.grad is not None and encoder.conv.weight.grad.abs().sum() > 0
print("OK: the straight-through gradient reaches the encoder")
