# Source: https://github.com/pytorch/pytorch/issues/715
# Category: unregistered-submodule
# Expect: ok
"""The SNLI classifier with the maintainers' fix: the hidden [Linear, activation] pairs are kept in
an nn.ModuleList, so they are registered, handed to the optimizer and trained."""
import torch
import torch.nn as nn

torch.manual_seed(0)
options = {"n_in": 12, "n_hid": 16, "n_layers": 2, "act": "Tanh"}


class SNLINet(nn.Module):
    def __init__(self, options):
        super().__init__()
        self.proj = nn.Linear(options["n_in"], options["n_hid"])
        self.hids = nn.ModuleList()
        for li in range(options["n_layers"]):
            self.hids.append(nn.ModuleList([
                nn.Linear(options["n_hid"], options["n_hid"]),
                eval("nn.{}".format(options["act"]))(),
            ]))
        self.classifier = nn.Linear(options["n_hid"], 3)

    def forward(self, premise, hypothesis):
        h = self.proj(premise) * self.proj(hypothesis)
        for linear, act in self.hids:
            h = act(linear(h))
        return self.classifier(h)


model = SNLINet(options)
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
premise, hypothesis = torch.randn(32, options["n_in"]), torch.randn(32, options["n_in"])
labels = torch.randint(0, 3, (32,))

before = model.hids[0][0].weight.detach().clone()
for epoch in range(5):
    optimizer.zero_grad()
    loss = criterion(model(premise, hypothesis), labels)
    loss.backward()
    optimizer.step()

n_params = len(list(model.parameters()))
assert n_params == 4 + 2 * options["n_layers"], n_params
assert not torch.equal(before, model.hids[0][0].weight)
print("hidden layers registered and trained;", n_params, "parameter tensors")
