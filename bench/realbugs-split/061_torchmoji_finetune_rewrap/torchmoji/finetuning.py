"""Fine-tuning helpers: the loss and the training loop."""
import numpy as np
import torch
import torch.nn as nn
from torch.autograd import Variable


def calc_loss(loss_op, pred, yv):
    if type(loss_op) is nn.CrossEntropyLoss:
        return loss_op(pred.squeeze(), yv.squeeze())
    return loss_op(pred.squeeze(), yv.squeeze().float())


def fit_model(model, loss_op, optim_op, train_gen, val_gen, epochs):
    history = []
    for epoch in range(epochs):
        for X_train, y_train in train_gen:
            model.train()
            optim_op.zero_grad()
            output = model(X_train)
            loss = calc_loss(loss_op, output, y_train)
            loss = Variable(loss, requires_grad=True)  # BUG: loss-rewrap
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1)
            optim_op.step()
        model.eval()
        with torch.no_grad():
            val_loss = np.mean([calc_loss(loss_op, model(xv), yv).item() for xv, yv in val_gen])
        history.append(val_loss)
        print("epoch", epoch, "val loss", round(float(val_loss), 5))
    return history
