# Source: https://github.com/ikostrikov/pytorch-meta-optimizer/issues/11
# Category: unregistered-submodule
# Expect: ok
"""A learned optimiser ("learning to learn by gradient descent") keeps its stacked LSTM cells in a plain list
inside the MetaOptimizer module; the reporter noticed the LSTM weights are never optimised by the outer Adam."""
import torch
import torch.nn as nn

torch.manual_seed(0)


def preprocess_gradients(x, p=10.0):
    log = torch.log(torch.abs(x) + 1e-8) / p
    log = torch.clamp(log, min=-1)
    sign = torch.clamp(x * torch.exp(torch.tensor(p)), -1, 1)
    return torch.stack((log, sign), dim=1)


class MetaOptimizer(nn.Module):
    def __init__(self, num_layers, hidden_size):
        super(MetaOptimizer, self).__init__()
        self.hidden_size = hidden_size
        self.linear1 = nn.Linear(3, hidden_size)
        self.ln1 = nn.LayerNorm(hidden_size)

        self.lstms = nn.ModuleList()
        for i in range(num_layers):
            self.lstms.append(nn.LSTMCell(hidden_size, hidden_size))

        self.linear2 = nn.Linear(hidden_size, 1)
        with torch.no_grad():
            self.linear2.weight.mul_(0.1)
            self.linear2.bias.fill_(0.0)

    def reset_lstm(self, n):
        self.hx = [torch.zeros(n, self.hidden_size) for _ in range(len(self.lstms))]
        self.cx = [torch.zeros(n, self.hidden_size) for _ in range(len(self.lstms))]

    def forward(self, x):
        x = torch.tanh(self.ln1(self.linear1(x)))
        for i in range(len(self.lstms)):
            self.hx[i], self.cx[i] = self.lstms[i](x, (self.hx[i], self.cx[i]))
            x = self.hx[i]
        return self.linear2(x).squeeze(-1)

    def meta_update(self, flat_params, flat_grads):
        inputs = torch.cat((preprocess_gradients(flat_grads), flat_params.detach().unsqueeze(1)), 1)
        return flat_params + self(inputs)


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
assert n_registered > n_lstm > 0
assert not any(torch.equal(b, c.weight_ih) for b, c in zip(lstm_before, meta_optimizer.lstms))
print("OK: the meta optimizer registers", n_registered, "parameters including the", n_lstm, "LSTM ones, which were trained")
