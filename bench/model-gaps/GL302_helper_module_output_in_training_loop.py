"""GL302 recall gap (helper called in the training loop): the helper sets requires_grad=False on the
output of model.backbone (a module attribute nn.Linear of a class in the file). torch raises
RuntimeError at that line on the first call; gradlint reports nothing (a module's output is only
'probably' requiring grad, and GL302 skips probable values; same for a local nn.Linear output)."""

import copy
import torch
import torch.nn as nn
import torch.nn.functional as F
from gradlint.testing import raises
ONLY_LEAVES = "you can only change requires_grad flags of leaf variables"


class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Linear(3, 3)
        self.head = nn.Linear(3, 1)

    def forward(self, x):
        return self.head(torch.relu(self.backbone(x)))


def _data():
    torch.manual_seed(0)
    return torch.randn(4, 3), torch.randn(4, 1)


def _train_step_freezing_features(model, opt, x, y):
    opt.zero_grad()
    feats = model.backbone(x)
    feats.requires_grad = False  # error: GL302
    loss = F.mse_loss(model.head(feats), y)
    loss.backward()
    opt.step()


@raises(RuntimeError, ONLY_LEAVES)
def bad_helper_in_training_loop():
    model = _Net()
    opt = torch.optim.SGD(model.head.parameters(), lr=0.1)
    x, y = _data()
    for epoch in range(2):
        _train_step_freezing_features(model, opt, x, y)


if __name__ == "__main__":
    import warnings
    warnings.simplefilter("always")
    try:
        result = globals()["bad_helper_in_training_loop"]()  # not a direct call: gradlint would walk it again
        if isinstance(result, tuple) and len(result) == 2:
            print("actual:", result[0], "| expected:", result[1])
        else:
            print("returned:", result)
    except Exception as e:
        print(type(e).__name__ + ":", e)
