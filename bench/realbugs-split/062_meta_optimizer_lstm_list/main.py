# Source: https://github.com/ikostrikov/pytorch-meta-optimizer/issues/11
# Category: unregistered-submodule
# Expect: silent: the LSTM cells live in a plain Python list, so they are not in meta_optimizer.parameters() and the meta-training never updates them
"""A learned optimiser ("learning to learn by gradient descent") keeps its stacked LSTM cells in a plain list
inside the MetaOptimizer module; the reporter noticed the LSTM weights are never optimised by the outer Adam."""
import torch

from meta_optimizer import MetaOptimizer

torch.manual_seed(0)


def optimizee_loss(flat_params, X, y):
    w, b = flat_params[:4], flat_params[4]
    return ((X @ w + b - y) ** 2).mean()


meta_optimizer = MetaOptimizer(num_layers=2, hidden_size=10)
optimizer = torch.optim.Adam(meta_optimizer.parameters(), lr=1e-2)
lstm_before = [c.weight_ih.detach().clone() for c in meta_optimizer.lstms]

for episode in range(5):
    X, y = torch.randn(32, 4), torch.randn(32)
    flat_params = torch.zeros(5, requires_grad=True)
    meta_optimizer.reset_lstm(5)
    meta_loss = 0.0
    for step in range(4):
        loss = optimizee_loss(flat_params, X, y)
        grads, = torch.autograd.grad(loss, flat_params, retain_graph=True)
        flat_params = meta_optimizer.meta_update(flat_params, grads.detach())
        meta_loss = meta_loss + optimizee_loss(flat_params, X, y)
    optimizer.zero_grad()
    meta_loss.backward()
    optimizer.step()

n_registered = sum(p.numel() for p in meta_optimizer.parameters())
n_lstm = sum(p.numel() for c in meta_optimizer.lstms for p in c.parameters())
assert all(torch.equal(b, c.weight_ih) for b, c in zip(lstm_before, meta_optimizer.lstms))
assert not any(p is q for c in meta_optimizer.lstms for p in c.parameters() for q in meta_optimizer.parameters())
print("EVIDENCE: the meta optimizer registers", n_registered, "parameters; the", n_lstm,
      "LSTM parameters are missing and stayed unchanged after meta-training")
