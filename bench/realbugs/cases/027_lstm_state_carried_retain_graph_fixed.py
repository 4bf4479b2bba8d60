# Source: https://blog.youkuaiyun.com/windhawk_fly/article/details/143405685
# Category: backward-twice
# Expect: ok
"""Fixed twin: the carried hidden state is detached after each batch (truncated BPTT), so every
backward walks only the current batch's graph and needs no retain_graph."""
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
before = lstm.proj.weight.detach().clone()

for epoch in range(EPOCH):
    batch_num = 0
    h0 = torch.randn((num_layers, batch_size, hidden_dim), requires_grad=False)
    c0 = torch.randn((num_layers, batch_size, hidden_dim), requires_grad=False)
    for batch in data_loader:
        optimizer.zero_grad()
        output, (h0, c0) = lstm(batch[0], h0.detach(), c0.detach())
        loss = loss_fn(output.reshape(-1, embedding_dim), batch[1])
        loss.backward()
        optimizer.step()
        batch_num += 1
        if batch_num % min(10, batch_count // 2) == 0:
            print(f'epoch {epoch} : batch {batch_num} : {loss.item():.4f}')

assert not torch.equal(before, lstm.proj.weight.detach())
