"""GL604 recall: Trainer.setup() builds self.optimizer from self.model.parameters(); Trainer.finetune() then replaces self.model.head = nn.Linear(...): the new head never trains. Not reported (the rule looks within one function)."""

import torch
import torch.nn as nn

from gradlint.testing import silently_wrong


class _Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Linear(2, 2)
        self.head = nn.Linear(2, 1)

    def forward(self, x):
        return self.head(self.encoder(x))


class _FinetuneTrainer:
    def setup(self):
        torch.manual_seed(0)
        self.model = _Classifier()
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.5)

    def finetune(self, steps):
        self.model.head = nn.Linear(2, 1)  # expected error: GL604 (gradlint: see header)
        before = self.model.head.weight.detach().clone()
        for _ in range(steps):
            self.optimizer.zero_grad()
            self.model(torch.ones(1, 2)).sum().backward()
            self.optimizer.step()
        return before


@silently_wrong
def bad_trainer_swaps_head_after_setup():
    trainer = _FinetuneTrainer()
    trainer.setup()
    before = trainer.finetune(2)
    return torch.allclose(before, trainer.model.head.weight.detach()), False



def _show(fn):
    try:
        print(fn.__name__, "->", fn())
    except Exception as e:
        print(fn.__name__, "-> raised", type(e).__name__ + ":", str(e).splitlines()[0])


if __name__ == "__main__":
    _show(bad_trainer_swaps_head_after_setup)
