"""GL703 recall: Trainer.setup() caches self.feats = self.backbone(x) under inference_mode; fit() back-propagates self.head(self.feats): RuntimeError. Not reported. Root cause: a module's output computed under torch.inference_mode() (backbone(x), model.encoder(x)) is not treated as an inference tensor; only factory results (torch.randn under inference_mode) are."""

import torch
import torch.nn as nn

from gradlint.testing import raises, silently_wrong


INFERENCE = "Inference tensors cannot be saved for backward"


class _CachingTrainer:
    def setup(self):
        torch.manual_seed(0)
        self.backbone, self.head = nn.Linear(3, 3), nn.Linear(3, 1)
        self.optimizer = torch.optim.SGD(self.head.parameters(), lr=0.1)
        with torch.inference_mode():
            self.feats = self.backbone(torch.randn(4, 3))

    def fit(self, epochs):
        for _ in range(epochs):
            self.optimizer.zero_grad()
            self.head(self.feats).sum().backward()  # expected error: GL703 (gradlint: see header)
            self.optimizer.step()


@raises(RuntimeError, INFERENCE)
def bad_trainer_caches_features_in_setup():
    trainer = _CachingTrainer()
    trainer.setup()
    trainer.fit(2)



def _show(fn):
    try:
        print(fn.__name__, "->", fn())
    except Exception as e:
        print(fn.__name__, "-> raised", type(e).__name__ + ":", str(e).splitlines()[0])


if __name__ == "__main__":
    _show(bad_trainer_caches_features_in_setup)

