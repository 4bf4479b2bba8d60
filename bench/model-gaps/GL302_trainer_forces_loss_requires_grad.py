"""GL302 recall gap (method using state set in setup()): fit() sets loss.requires_grad = True on a
loss computed from self.model (an nn.Linear bound in setup()). torch raises RuntimeError there;
gradlint reports nothing (module output is only probable; also missed when setup() binds a plain
requires_grad tensor self.w and fit() does z = self.w * 2; z.requires_grad = False)."""

import copy
import torch
import torch.nn as nn
import torch.nn.functional as F
from gradlint.testing import raises
ONLY_LEAVES = "you can only change requires_grad flags of leaf variables"


def _data():
    torch.manual_seed(0)
    return torch.randn(4, 3), torch.randn(4, 1)


class _ForcingTrainer:
    def setup(self):
        torch.manual_seed(0)
        self.model = nn.Linear(3, 1)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)

    def fit(self, x, y):
        for _ in range(2):
            self.opt.zero_grad()
            loss = F.mse_loss(self.model(x), y)
            loss.requires_grad = True  # error: GL302
            loss.backward()
            self.opt.step()


@raises(RuntimeError, ONLY_LEAVES)
def bad_trainer_forces_loss_requires_grad():
    x, y = _data()
    trainer = _ForcingTrainer()
    trainer.setup()
    trainer.fit(x, y)


if __name__ == "__main__":
    import warnings
    warnings.simplefilter("always")
    try:
        result = globals()["bad_trainer_forces_loss_requires_grad"]()  # not a direct call: gradlint would walk it again
        if isinstance(result, tuple) and len(result) == 2:
            print("actual:", result[0], "| expected:", result[1])
        else:
            print("returned:", result)
    except Exception as e:
        print(type(e).__name__ + ":", e)
