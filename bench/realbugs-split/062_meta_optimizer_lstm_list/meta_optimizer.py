"""The learned (LSTM) optimiser."""
import torch
import torch.nn as nn

from utils import preprocess_gradients


class MetaOptimizer(nn.Module):
    def __init__(self, num_layers, hidden_size):
        super(MetaOptimizer, self).__init__()
        self.hidden_size = hidden_size
        self.linear1 = nn.Linear(3, hidden_size)
        self.ln1 = nn.LayerNorm(hidden_size)

        self.lstms = []  # BUG: unregistered-submodule
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
