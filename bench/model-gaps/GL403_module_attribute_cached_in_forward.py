"""GL403 recall gap (module attribute): _CachingNet.forward() stores self.last_features = h (a
graph tensor); the training loop keeps the best model with copy.deepcopy(model), which raises
RuntimeError. gradlint reports nothing: a non-leaf stored on self in forward() is not tracked as
held by the module (found only when model.cache = ... is written in the same function)."""

import copy
import torch
import torch.nn as nn
from gradlint.testing import raises
LEAVES_ONLY = "Only Tensors created explicitly by the user (graph leaves) support the deepcopy protocol"


def _data():
    torch.manual_seed(0)
    return torch.randn(4, 3), torch.randn(4, 1)


def _train_step(model, opt, x, y):
    opt.zero_grad()
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    opt.step()
    return loss


class _CachingNet(nn.Module):
    def __init__(self, detach=False):
        super().__init__()
        self.encoder = nn.Linear(3, 3)
        self.head = nn.Linear(3, 1)
        self.detach = detach

    def forward(self, x):
        h = torch.relu(self.encoder(x))
        self.last_features = h.detach() if self.detach else h
        return self.head(h)


@raises(RuntimeError, LEAVES_ONLY)
def bad_module_attribute_cached_features():
    x, y = _data()
    model = _CachingNet()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        _train_step(model, opt, x, y)
        best_model = copy.deepcopy(model)  # error: GL403


if __name__ == "__main__":
    import warnings
    warnings.simplefilter("always")
    try:
        result = globals()["bad_module_attribute_cached_features"]()  # not a direct call: gradlint would walk it again
        print("returned:", result)
    except Exception as e:
        print(type(e).__name__ + ":", e)
