# Source: https://github.com/MorvanZhou/PyTorch-Tutorial/issues/57
# Category: backward-twice
# Expect: raises RuntimeError: Trying to backward through the graph a second time
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
for step in range(20):
    start, end = step * np.pi, (step + 1) * np.pi
    steps = np.linspace(start, end, TIME_STEP, dtype=np.float32, endpoint=False)
    x_np = np.sin(steps)
    y_np = np.cos(steps)
    x = torch.from_numpy(x_np[np.newaxis, :, np.newaxis])
    y = torch.from_numpy(y_np[np.newaxis, :, np.newaxis])

    prediction, h_state = rnn(x, h_state)  # BUG: backward-twice
    loss = loss_func(prediction, y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()

print("EVIDENCE: training ran without error, which it should not have")
