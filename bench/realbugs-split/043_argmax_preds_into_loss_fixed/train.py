# Source: https://php.bkmy88.com/faq/1835025.html
# Category: nondifferentiable-op
# Expect: ok
"""Fixed twin: the loss is CrossEntropyLoss on the raw logits; argmax is used only for the
accuracy metric."""
import torch
import torch.nn as nn

from helper_functions import accuracy_fn as accuracy
from model import BlobModel

torch.manual_seed(0)

X_train = torch.randn(32, 2)
y_train = torch.randint(0, 4, (32,))

model = BlobModel()
loss_fn = nn.CrossEntropyLoss()
optimiser = torch.optim.SGD(model.parameters(), lr=0.1)
Epochs = 3
losses = []

for epoch in range(Epochs):
    model.train()
    train_logits = model(X_train)
    train_preds = torch.softmax(train_logits, dim=1).argmax(dim=1)
    loss = loss_fn(train_logits, y_train)
    train_accu = accuracy(y_train, train_preds)
    optimiser.zero_grad()
    loss.backward()
    optimiser.step()
    losses.append(loss.item())
    print(epoch, loss.item(), train_accu)

assert model.layers[0].weight.grad is not None
assert losses[-1] < losses[0]
print("loss decreased")
