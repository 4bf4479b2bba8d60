# Source: https://github.com/MorvanZhou/PyTorch-Tutorial/issues/57
# Category: backward-twice
# Expect: ok
"""In a tutorial RNN that regresses cos from sin, the hidden state returned by the model is fed into the next
step; the reporter removed the `h_state = h_state.data` repacking line and the second backward failed."""
import numpy as np
import torch
from torch import nn

from model import RNN

torch.manual_seed(0)

TIME_STEP = 10
LR = 0.02

rnn = RNN()
optimizer = torch.optim.Adam(rnn.parameters(), lr=LR)
loss_func = nn.MSELoss()

h_state = None
losses = []
for step in range(20):
    start, end = step * np.pi, (step + 1) * np.pi
    steps = np.linspace(start, end, TIME_STEP, dtype=np.float32, endpoint=False)
    x_np = np.sin(steps)
    y_np = np.cos(steps)
    x = torch.from_numpy(x_np[np.newaxis, :, np.newaxis])
    y = torch.from_numpy(y_np[np.newaxis, :, np.newaxis])

    prediction, h_state = rnn(x, h_state)
    h_state = h_state.detach()  # carry the state forward but cut its history
    loss = loss_func(prediction, y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    losses.append(loss.item())

assert h_state.grad_fn is None and len(losses) == 20
assert np.mean(losses[-5:]) < np.mean(losses[:5])
print("OK: 20 truncated-BPTT steps ran; loss", round(np.mean(losses[:5]), 4), "->", round(np.mean(losses[-5:]), 4))
