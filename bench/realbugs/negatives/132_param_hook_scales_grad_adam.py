# Source: https://github.com/pytorch/pytorch/issues/2843
# Category: function-mutates-grad-output
# Expect: ok
"""The reporter wants to perturb a parameter's gradient before the optimizer sees it and registers a tensor hook
that returns a new, scaled gradient; this is correct (a.grad is 10x), Adam's step just does not grow because Adam
normalises by the gradient's running RMS, while plain SGD's step does."""
import torch
import torch.nn as nn

torch.manual_seed(0)


def one_step(opt_cls, scale):
    X = torch.tensor([4.0])
    a = torch.tensor([2.0], requires_grad=True)
    criterion = nn.MSELoss()
    optimizer = opt_cls([a], lr=1e-2)
    h = a.register_hook(lambda grad: grad * scale)
    optimizer.zero_grad()
    y = a * X
    loss = criterion(y, torch.tensor([7.0]))
    loss.backward()
    optimizer.step()
    h.remove()
    return a.detach().clone(), a.grad.clone()


a1, g1 = one_step(torch.optim.Adam, 1.0)
a10, g10 = one_step(torch.optim.Adam, 10.0)
s1, _ = one_step(torch.optim.SGD, 1.0)
s10, _ = one_step(torch.optim.SGD, 10.0)
print("grads", g1.item(), g10.item(), "| Adam steps", (2 - a1).item(), (2 - a10).item(), "| SGD steps", (2 - s1).item(), (2 - s10).item())
assert torch.allclose(g10, 10 * g1)  # the hook's returned gradient is what lands in .grad
assert torch.allclose(a1, a10, atol=1e-6)  # Adam is invariant to a constant gradient scale
assert torch.allclose(2 - s10, 10 * (2 - s1))  # SGD uses the scaled gradient directly
