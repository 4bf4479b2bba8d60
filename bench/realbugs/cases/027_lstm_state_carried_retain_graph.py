# Source: https://blog.youkuaiyun.com/windhawk_fly/article/details/143405685
# Category: backward-twice
# Expect: raises RuntimeError: one of the variables needed for gradient computation has been modified by an inplace operation
"""An LSTM carries (h0, c0) from batch to batch without detaching them. The first error ("backward
through the graph a second time") was silenced with retain_graph=True, which then fails because
optimizer.step() has modified the weights the previous batch's graph saved."""
import torch
import torch.nn as nn

torch.manual_seed(0)

EPOCH = 2
num_layers, batch_size, hidden_dim, embedding_dim, seq_len = 1, 4, 6, 5, 7


class LSTMNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(embedding_dim, hidden_dim, num_layers, batch_first=True)
        self.proj = nn.Linear(hidden_dim, embedding_dim)

    def forward(self, x, h0, c0):
        out, (h, c) = self.lstm(x, (h0, c0))
        return self.proj(out), (h, c)


lstm = LSTMNet()
loss_fn = nn.MSELoss()
optimizer = torch.optim.Adam(lstm.parameters(), lr=1e-2)
data_loader = [(torch.randn(batch_size, seq_len, embedding_dim),
                torch.randn(batch_size * seq_len, embedding_dim)) for _ in range(3)]
batch_count = len(data_loader)

for epoch in range(EPOCH):
    batch_num = 0
    h0 = torch.randn((num_layers, batch_size, hidden_dim), requires_grad=False)
    c0 = torch.randn((num_layers, batch_size, hidden_dim), requires_grad=False)
    for batch in data_loader:
        optimizer.zero_grad()
        output, (h0, c0) = lstm(batch[0], h0, c0)  # BUG: backward-twice
        loss = loss_fn(output.reshape(-1, embedding_dim), batch[1])
        loss.backward(retain_graph=True)  # BUG: backward-twice
        optimizer.step()
        batch_num += 1
        if batch_num % min(10, batch_count // 2) == 0:
            print(f'epoch {epoch} : batch {batch_num} : {loss.item():.4f}')
