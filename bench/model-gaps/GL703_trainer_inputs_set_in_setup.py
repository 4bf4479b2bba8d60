"""GL703 recall: Trainer.setup() stores self.inputs = torch.randn(...) under inference_mode; fit() back-propagates self.head(self.inputs): RuntimeError. Not reported: the inference tensor kept in an attribute set by another method is not followed."""

import torch
import torch.nn as nn

from gradlint.testing import raises, silently_wrong


INFERENCE = "Inference tensors cannot be saved for backward"


class _InputTrainer:
    def setup(self):
        torch.manual_seed(0)
        self.head = nn.Linear(3, 1)
        self.optimizer = torch.optim.SGD(self.head.parameters(), lr=0.1)
        with torch.inference_mode():
            self.inputs = torch.randn(4, 3)

    def fit(self, epochs):
        for _ in range(epochs):
            self.optimizer.zero_grad()
            self.head(self.inputs).sum().backward()  # expected error: GL703 (gradlint: see header)
            self.optimizer.step()


@raises(RuntimeError, INFERENCE)
def bad_trainer_inputs_set_in_setup():
    trainer = _InputTrainer()
    trainer.setup()
    trainer.fit(2)



def _show(fn):
    try:
        print(fn.__name__, "->", fn())
    except Exception as e:
        print(fn.__name__, "-> raised", type(e).__name__ + ":", str(e).splitlines()[0])


if __name__ == "__main__":
    _show(bad_trainer_inputs_set_in_setup)

