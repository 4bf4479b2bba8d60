"""Fixture gap from GL102_inplace_on_saved_output.py: bad_trainer_state_set_in_setup -- bad (gradlint should report the marked line).

Missed: fit() clamps in place the output of self.model, an nn.Sequential ending in nn.Sigmoid() built in setup(); SigmoidBackward saved that output and loss.backward() raises 'modified by an inplace operation'. gradlint does not see that the Sequential's output is a saved sigmoid output (the in-place op is not an inplace module).

Run: python3 GL102_trainer_sequential_sigmoid_clamp.py   (shows what torch does);  gradlint check --no-cache GL102_trainer_sequential_sigmoid_clamp.py
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from gradlint.testing import raises
MODIFIED = "modified by an inplace operation"


class _ClampTrainer:
    def setup(self):
        torch.manual_seed(0)
        self.model = nn.Sequential(nn.Linear(3, 1), nn.Sigmoid())
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)

    def fit(self, x, epochs):
        for _ in range(epochs):
            self.opt.zero_grad()
            probs = self.model(x)
            probs.clamp_(1e-6, 1 - 1e-6)  # error: GL102
            loss = -probs.log().mean()
            loss.backward()
            self.opt.step()


@raises(RuntimeError, MODIFIED)
def bad_trainer_state_set_in_setup():
    trainer = _ClampTrainer()
    trainer.setup()
    trainer.fit(torch.randn(4, 3), 2)


if __name__ == "__main__":
    import traceback
    try:
        print("result:", bad_trainer_state_set_in_setup())
    except Exception:
        traceback.print_exc()
