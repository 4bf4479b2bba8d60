# Source: https://github.com/jcjohnson/pytorch-examples/pull/4
# Category: inplace-through-data
# Expect: ok
"""A classic two-layer autograd example updates the weights through `.data` and zeroes `.grad.data`;
the version in the PR's discussion zeroes the gradients only after the update (the first iteration has
no .grad yet), which is correct code that a naive rule about `.data` writes would flag."""
import torch
from torch.autograd import Variable

torch.manual_seed(0)
dtype = torch.FloatTensor

N, D_in, H, D_out = 16, 50, 20, 5

x = Variable(torch.randn(N, D_in).type(dtype), requires_grad=False)
y = Variable(torch.randn(N, D_out).type(dtype), requires_grad=False)

w1 = Variable(torch.randn(D_in, H).type(dtype), requires_grad=True)
w2 = Variable(torch.randn(H, D_out).type(dtype), requires_grad=True)

learning_rate = 1e-4
losses = []
for t in range(50):
    y_pred = x.mm(w1).clamp(min=0).mm(w2)
    loss = (y_pred - y).pow(2).sum()
    losses.append(loss.item())

    loss.backward()

    # gradient descent step on the raw tensors, outside the graph
    w1.data -= learning_rate * w1.grad.data
    w2.data -= learning_rate * w2.grad.data

    # zero the gradients after the update (they exist only after the first backward)
    w1.grad.data.zero_()
    w2.grad.data.zero_()

assert w1.is_leaf and w2.is_leaf and w1.grad_fn is None
assert losses[-1] < 0.5 * losses[0]
print("OK: loss fell from %.1f to %.1f with .data updates; weights are still leaves" % (losses[0], losses[-1]))
