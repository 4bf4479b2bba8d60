"""GL303 recall gap (helper called in the training loop): _train_step returns feats.grad where
feats = model.backbone(x) (a module attribute nn.Linear); None on every call (torch warns).
gradlint reports nothing: a module's output is only 'probably' requiring grad and GL303 skips
probable values (same for out = nn.Linear(3, 1)(x); out.grad in one function)."""

import copy
import torch
import torch.nn as nn
from gradlint.testing import raises, silently_wrong, warns
GRAD_WARNING = "is not a leaf Tensor is being accessed"
NONE_NORM = "'NoneType' object has no attribute 'norm'"


class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Linear(3, 3)
        self.head = nn.Linear(3, 1)

    def forward(self, x):
        return self.head(self.backbone(x))


def _train_step(model, opt, x):
    opt.zero_grad()
    feats = model.backbone(x)
    loss = model.head(feats).sum()
    loss.backward()
    opt.step()
    return feats.grad  # error: GL303


@warns(UserWarning, GRAD_WARNING)
@silently_wrong
def bad_helper_in_training_loop():
    torch.manual_seed(0)
    model = _Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(4, 3)
    feature_grads = []
    for epoch in range(2):
        feature_grads.append(_train_step(model, opt, x))
    return feature_grads[0], "the features' gradient"


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
