# Source: https://github.com/Seanny123/da-rnn/issues/21
# Category: graph-kept-alive
# Expect: ok
"""A dual-stage attention RNN's `predict()` runs the encoder/decoder without `torch.no_grad()` and stores
`decoder(...).cpu().data.numpy()`; a user believed this updates the weights during validation. It does not: no backward or optimizer
step runs, and `.data.numpy()` keeps no graph - it only costs some autograd bookkeeping."""
import numpy as np
import torch
import torch.nn as nn

torch.manual_seed(0)
device = torch.device("cpu")


class Encoder(nn.Module):
    def __init__(self, input_size, hidden_size, T):
        super().__init__()
        self.T = T
        self.lstm_layer = nn.LSTM(input_size=input_size, hidden_size=hidden_size, batch_first=True)
        self.attn_linear = nn.Linear(hidden_size + T - 1, 1)

    def forward(self, input_data):
        weights = torch.softmax(self.attn_linear(torch.cat(
            [input_data.permute(0, 2, 1), torch.zeros(input_data.size(0), input_data.size(2), 16)], dim=2)).squeeze(-1), dim=1)
        weighted = input_data * weights.unsqueeze(1)
        input_encoded, _ = self.lstm_layer(weighted)
        return weights, input_encoded


class Decoder(nn.Module):
    def __init__(self, encoder_hidden_size, T):
        super().__init__()
        self.fc = nn.Linear(encoder_hidden_size + T - 1, 1)

    def forward(self, input_encoded, y_history):
        return self.fc(torch.cat([input_encoded[:, -1], y_history], dim=1))


class DaRnnNet:
    def __init__(self, encoder, decoder):
        self.encoder = encoder
        self.decoder = decoder


def numpy_to_tvar(x):
    return torch.from_numpy(x).type(torch.FloatTensor).to(device)


def predict(t_net, t_dat, batch_size, T):
    y_pred = np.zeros(t_dat.shape[0] - T + 1)
    for y_i in range(0, len(y_pred), batch_size):
        y_slc = slice(y_i, y_i + batch_size)
        batch_idx = range(len(y_pred))[y_slc]
        b_len = len(batch_idx)
        X = np.zeros((b_len, T - 1, t_dat.shape[1] - 1))
        y_history = np.zeros((b_len, T - 1))
        for b_i, b_idx in enumerate(batch_idx):
            idx = range(b_idx, b_idx + T - 1)
            X[b_i, :, :] = t_dat[idx, :-1]
            y_history[b_i, :] = t_dat[idx, -1]
        y_history = numpy_to_tvar(y_history)
        _, input_encoded = t_net.encoder(numpy_to_tvar(X))
        y_pred[y_slc] = t_net.decoder(input_encoded, y_history).cpu().data.numpy()[:, 0]
    return y_pred


T = 10
enc = Encoder(input_size=3, hidden_size=16, T=T)
dec = Decoder(encoder_hidden_size=16, T=T)
t_net = DaRnnNet(enc, dec)
state_before = {k: v.clone() for k, v in list(enc.state_dict().items()) + list(dec.state_dict().items())}

data = np.random.RandomState(0).randn(60, 4)
y_pred = predict(t_net, data, batch_size=16, T=T)

state_after = dict(list(enc.state_dict().items()) + list(dec.state_dict().items()))
assert all(torch.equal(state_before[k], state_after[k]) for k in state_before)
assert all(p.grad is None for p in list(enc.parameters()) + list(dec.parameters()))
assert isinstance(y_pred, np.ndarray) and y_pred.shape == (51,)
print("OK: predict() without no_grad left every weight unchanged and no .grad; %d predictions" % len(y_pred))
