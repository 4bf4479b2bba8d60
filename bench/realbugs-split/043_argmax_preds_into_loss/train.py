# Source: https://php.bkmy88.com/faq/1835025.html
# Category: nondifferentiable-op
# Expect: raises RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn
"""A multi-class training loop turns the logits into hard labels with softmax().argmax()
and feeds those labels to the loss; argmax cuts the graph, so backward has nothing to do."""
import torch
import torch.nn as nn

from helper_functions import accuracy_fn as accuracy
from model import BlobModel

torch.manual_seed(0)

X_train = torch.randn(32, 2)
y_train = torch.randint(0, 4, (32,)).type(torch.float32)

model = BlobModel()
loss_fn = nn.MSELoss()
optimiser = torch.optim.SGD(model.parameters(), lr=0.1)
Epochs = 3

for epoch in range(Epochs):
    model.train()
    train_logits = model(X_train)
    train_preds_probs = torch.softmax(train_logits, dim=1).argmax(dim=1).type(torch.float32)
    loss = loss_fn(train_preds_probs, y_train)  # BUG: nondifferentiable-op
    train_accu = accuracy(y_train, train_preds_probs)
    optimiser.zero_grad()
    loss.backward()
    optimiser.step()
    print(epoch, loss.item(), train_accu)
