"""Fixture gap from GL101_inplace_on_leaf.py: good_ema_after_requires_grad_false -- good (gradlint should report nothing).

False alarm: the EMA module's parameters were frozen with self.ema.requires_grad_(False) in build(); gradlint still reports e.mul_(0.5).add_(...) in fit() as an in-place op on a leaf that requires grad (twice, on e and on e.mul_(...)). torch runs it without error.

Run: python3 GL101_ema_requires_grad_false.py   (shows what torch does);  gradlint check --no-cache GL101_ema_requires_grad_false.py
"""
import torch
import torch.nn as nn
from torch import nn as tnn
from gradlint.testing import raises
LEAF = "a leaf Variable that requires grad is being used in an in-place operation"
VIEW = "a view of a leaf Variable that requires grad is being used in an in-place operation"


class _EmaTrainer:
    def build(self):
        torch.manual_seed(0)
        self.model = nn.Linear(3, 1)
        self.ema = nn.Linear(3, 1)
        self.ema.load_state_dict(self.model.state_dict())
        self.ema.requires_grad_(False)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)

    def fit(self, x, y, epochs):
        for _ in range(epochs):
            self.opt.zero_grad()
            ((self.model(x) - y) ** 2).mean().backward()
            self.opt.step()
            for e, p in zip(self.ema.parameters(), self.model.parameters()):
                e.mul_(0.5).add_(p.detach(), alpha=0.5)


def good_ema_after_requires_grad_false():
    trainer = _EmaTrainer()
    trainer.build()
    before = trainer.ema.weight.detach().clone()
    trainer.fit(torch.randn(4, 3), torch.randn(4, 1), 1)
    return trainer.ema.weight, 0.5 * before + 0.5 * trainer.model.weight.detach()


if __name__ == "__main__":
    import traceback
    try:
        print("result:", good_ema_after_requires_grad_false())
    except Exception:
        traceback.print_exc()
