"""GL502 recall: Trainer.build() (not __init__) computes self.feats = self.backbone(x) with grad; fit() back-propagates head(self.feats) every epoch: the second epoch raises. The local form (feats built before the loop) is reported; the attribute built in another method is not."""

import torch
import torch.nn as nn

from gradlint.testing import raises


SECOND_TIME = "Trying to backward through the graph a second time"


class _FeatureTrainer:
    def build(self):
        torch.manual_seed(0)
        self.backbone, self.head = nn.Linear(3, 3), nn.Linear(3, 1)
        self.optimizer = torch.optim.SGD(self.head.parameters(), lr=0.1)
        self.feats = self.backbone(torch.randn(4, 3))  # expected error: GL502 (gradlint: see header)

    def fit(self, epochs):
        for _ in range(epochs):
            self.optimizer.zero_grad()
            self.head(self.feats).sum().backward()
            self.optimizer.step()


@raises(RuntimeError, SECOND_TIME)
def bad_trainer_features_built_in_build():
    trainer = _FeatureTrainer()
    trainer.build()
    trainer.fit(2)



def _show(fn):
    try:
        print(fn.__name__, "->", fn())
    except Exception as e:
        print(fn.__name__, "-> raised", type(e).__name__ + ":", str(e).splitlines()[0])


if __name__ == "__main__":
    _show(bad_trainer_features_built_in_build)
