# Source: https://github.com/huggingface/torchMoji/issues/21
# Category: loss-rewrap
# Expect: silent: the model's forward returns outputs.data for tensor inputs, and the re-wrapped loss is a fresh leaf, so fine-tuning never changes a weight
"""Fine-tuning torchMoji raised "element 0 of tensors does not require grad"; the reporter wrapped the loss in
Variable(loss, requires_grad=True), which silenced the error but the val loss stayed identical epoch after epoch
(the real cause: forward() returned outputs.data when given a LongTensor)."""
import numpy as np
import torch
import torch.nn as nn
from torch.autograd import Variable

torch.manual_seed(0)
device = torch.device("cpu")


class Attention(nn.Module):
    def __init__(self, attention_size):
        super().__init__()
        self.attention_vector = nn.Parameter(torch.randn(attention_size) * 0.05)

    def forward(self, inputs):
        logits = inputs.matmul(self.attention_vector)
        weights = torch.softmax(logits, dim=1)
        return (inputs * weights.unsqueeze(-1)).sum(dim=1), weights


class TorchMoji(nn.Module):
    def __init__(self, nb_classes, nb_tokens, embedding_dim=16, hidden_size=8):
        super().__init__()
        self.embed = nn.Embedding(nb_tokens, embedding_dim)
        self.embed_dropout = nn.Dropout(0.0)
        self.lstm_0 = nn.LSTM(embedding_dim, hidden_size, batch_first=True, bidirectional=True)
        self.lstm_1 = nn.LSTM(hidden_size * 2, hidden_size, batch_first=True, bidirectional=True)
        attention_size = 4 * hidden_size + embedding_dim
        self.attention_layer = Attention(attention_size)
        self.final_dropout = nn.Dropout(0.0)
        self.output_layer = nn.Sequential(nn.Linear(attention_size, nb_classes if nb_classes > 2 else 1))

    def forward(self, input_seqs):
        # remember the input format so the output can be returned in the same format
        return_numpy = False
        return_tensor = False
        if isinstance(input_seqs, torch.Tensor):
            input_seqs = Variable(input_seqs)
            return_tensor = True
        else:
            input_seqs = torch.from_numpy(input_seqs.astype('int64'))
            return_numpy = True

        x = torch.tanh(self.embed(input_seqs))
        x = self.embed_dropout(x)
        lstm_0_output, _ = self.lstm_0(x)
        lstm_1_output, _ = self.lstm_1(lstm_0_output)
        x = torch.cat((lstm_1_output, lstm_0_output, x), dim=2)
        x, att_weights = self.attention_layer(x)
        outputs = self.output_layer(self.final_dropout(x))

        if return_tensor:
            outputs = outputs.data  # BUG: loss-rewrap
        if return_numpy:
            outputs = outputs.data.numpy()
        return outputs


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


model = TorchMoji(nb_classes=2, nb_tokens=50).to(device)
X = torch.randint(1, 50, (32, 10))
y = (X[:, 0] > 25).long()
train_gen = [(X[i:i + 8], y[i:i + 8]) for i in range(0, 24, 8)]
val_gen = [(X[24:], y[24:])]
adam = torch.optim.Adam(model.parameters(), lr=0.01)
before = model.output_layer[0].weight.detach().clone()

history = fit_model(model, nn.BCEWithLogitsLoss(), adam, train_gen, val_gen, epochs=3)

assert torch.equal(before, model.output_layer[0].weight)
assert all(p.grad is None for p in model.parameters())
assert len(set(history)) == 1
print("EVIDENCE: after 3 epochs no parameter has a grad and the val loss is frozen at", round(float(history[0]), 5))
