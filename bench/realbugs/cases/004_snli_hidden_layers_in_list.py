# Source: https://github.com/pytorch/pytorch/issues/715
# Category: unregistered-submodule
# Expect: silent: the hidden Linear layers live in a plain Python list, so model.parameters() and the optimizer never see them and they never train
"""An SNLI classifier builds `n_layers` hidden [Linear, activation] pairs in a plain list inside
__init__; printing the model or its parameters shows only the classifier."""
import torch
import torch.nn as nn

torch.manual_seed(0)
options = {"n_in": 12, "n_hid": 16, "n_layers": 2, "act": "Tanh"}


class SNLINet(nn.Module):
    def __init__(self, options):
        super().__init__()
        self.proj = nn.Linear(options["n_in"], options["n_hid"])
        self.hids = []  # BUG: unregistered-submodule
        for li in range(options["n_layers"]):
            self.hids.append([
                nn.Linear(options["n_hid"], options["n_hid"]),
                eval("nn.{}".format(options["act"]))(),
            ])
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
assert n_params == 4, n_params  # proj + classifier only
assert torch.equal(before, model.hids[0][0].weight)
print("EVIDENCE: model.parameters() has", n_params, "tensors; hidden layer 0 weight unchanged after training")
