# Source: https://github.com/1zb/pytorch-image-comp-rnn/issues/4
# Category: function-backward-arity
# Expect: raises RuntimeError: returned an incorrect number of gradients (expected 2, got 1)
"""RNN image compression: the stochastic binarizer is a custom autograd Function whose forward takes
(input, is_training) but whose straight-through backward returns only one gradient; the user's first
loss.backward() died with "SignBackward returned an incorrect number of gradients"."""
import torch

import network

torch.manual_seed(0)

encoder, binarizer, decoder = network.EncoderCell(), network.Binarizer(), network.DecoderCell()
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
