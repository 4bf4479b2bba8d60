# Source: https://github.com/spro/practical-pytorch/issues/9
# Category: optimizer-stale-params
# Expect: silent: the optimizer holds the parameters of the first RNN instance; the RNN that is trained is a second instance, so its weights never change
"""In the char-RNN name-classification tutorial a reader replaced the manual `p.data.add_` update by `optimizer.step()` and the
loss stopped going down; the notebook created `rnn = RNN(...)` twice, and the optimizer had been built on the first one."""
import torch
import torch.nn as nn

torch.manual_seed(0)

all_letters = "abcdefghijklmnopqrstuvwxyz"
n_letters = len(all_letters)
all_categories = ["English", "French", "Italian"]
n_categories = len(all_categories)


def letterToIndex(letter):
    return all_letters.find(letter)


def lineToTensor(line):
    tensor = torch.zeros(len(line), 1, n_letters)
    for li, letter in enumerate(line):
        tensor[li][0][letterToIndex(letter)] = 1
    return tensor


class RNN(nn.Module):
    def __init__(self, input_size, hidden_size, output_size):
        super(RNN, self).__init__()
        self.hidden_size = hidden_size
        self.i2h = nn.Linear(input_size + hidden_size, hidden_size)
        self.i2o = nn.Linear(input_size + hidden_size, output_size)
        self.softmax = nn.LogSoftmax(dim=1)

    def forward(self, input, hidden):
        combined = torch.cat((input, hidden), 1)
        hidden = self.i2h(combined)
        output = self.i2o(combined)
        output = self.softmax(output)
        return output, hidden

    def initHidden(self):
        return torch.zeros(1, self.hidden_size)


n_hidden = 32
rnn = RNN(n_letters, n_hidden, n_categories)

learning_rate = 0.005
criterion = nn.NLLLoss()
optimizer = torch.optim.SGD(rnn.parameters(), lr=learning_rate)  # BUG: optimizer-stale-params


def train(category_tensor, line_tensor):
    hidden = rnn.initHidden()
    rnn.zero_grad()
    for i in range(line_tensor.size()[0]):
        output, hidden = rnn(line_tensor[i], hidden)
    loss = criterion(output, category_tensor)
    loss.backward()
    optimizer.step()
    return output, loss.item()


training_pairs = [("smith", "English"), ("dupont", "French"), ("rossi", "Italian"), ("jones", "English"),
                  ("martin", "French"), ("bianchi", "Italian")]

rnn = RNN(n_letters, n_hidden, n_categories)  # BUG: optimizer-stale-params
before = rnn.i2o.weight.detach().clone()
current_loss = 0
for epoch in range(1, 61):
    line, category = training_pairs[epoch % len(training_pairs)]
    category_tensor = torch.tensor([all_categories.index(category)])
    output, loss = train(category_tensor, lineToTensor(line))
    current_loss += loss

assert torch.equal(before, rnn.i2o.weight)
assert all(p.grad is not None for p in rnn.parameters())
print("EVIDENCE: the trained rnn's i2o.weight is unchanged after 60 steps although its .grad is filled;"
      " optimizer updates a discarded RNN instance")
