# Source: https://github.com/mikeizbicki/cmc-csci181-deeplearning/issues/7
# Category: misnamed-init
# Expect: ok
"""A student's character-CNN for classifying names spelled its constructor `_init_` (one underscore each side), so none of the
layers were ever built and `torch.optim.SGD(model.parameters(), ...)` failed; the hidden convolutions were also kept in a plain list."""
import torch
import torch.nn as nn

torch.manual_seed(0)


class Args:
    hidden_layer_size = 16
    num_layers = 3
    input_length = 10
    batch_size = 4
    learning_rate = 0.01
    momentum = 0.9
    weight_decay = 1e-4


args = Args()
vocabulary = "abcdefghijklmnopqrstuvwxyz"
all_categories = ["Arabic", "Chinese", "English", "Greek"]


class CNNModel(nn.Module):
    def __init__(self):
        super(CNNModel, self).__init__()
        self.relu = nn.ReLU()
        self.cnn = nn.Conv1d(len(vocabulary), args.hidden_layer_size, 3, padding=1)
        self.cnns = nn.ModuleList([nn.Conv1d(args.hidden_layer_size, args.hidden_layer_size, 3, padding=1)
                                   for _ in range(args.num_layers - 1)])
        self.fc = nn.Linear(args.hidden_layer_size * args.input_length, len(all_categories))

    def forward(self, x):
        out = torch.einsum("lbv->bvl", x)
        out = self.cnn(out)
        out = self.relu(out)
        for cnn in self.cnns:
            out = cnn(out)
            out = self.relu(out)
        out = out.view(args.batch_size, args.hidden_layer_size * args.input_length)
        out = self.fc(out)
        return out


def str_to_tensor(names):
    tensor = torch.zeros(args.input_length, len(names), len(vocabulary))
    for b, name in enumerate(names):
        for li, letter in enumerate(name[: args.input_length].lower()):
            tensor[li][b][vocabulary.find(letter)] = 1
    return tensor


model = CNNModel()
optimizer = torch.optim.SGD(
    model.parameters(),
    lr=args.learning_rate,
    momentum=args.momentum,
    weight_decay=args.weight_decay,
)
criterion = nn.CrossEntropyLoss()

names = ["Nassar", "Zhang", "Smith", "Pappas"]
category = torch.tensor([0, 1, 2, 3])
for step in range(5):
    output = model(str_to_tensor(names))
    loss = criterion(output, category)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()

n_convs = sum(isinstance(m, nn.Conv1d) for m in model.modules())
assert n_convs == args.num_layers
print("OK: %d conv layers registered, loss %.4f" % (n_convs, loss.item()))
