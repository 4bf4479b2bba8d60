"""Fixture gap from GL104_inplace_on_detached_alias.py: bad_trainer_state_set_in_setup -- bad (gradlint should report the marked line).

Wrong severity: preview = out.detach(); preview.round_() where out is the output of self.model = nn.Sequential(nn.Linear, nn.Tanh()) built in setup(): TanhBackward saved out, so loss.backward() raises 'modified by an inplace operation' (error per the rule's docs), but gradlint reports only the warning 'changes the original tensor too' (it does not see that the Sequential's output is a saved tanh output). Marked '# error: GL104' here.

Run: python3 GL104_trainer_sequential_tanh_severity.py   (shows what torch does);  gradlint check --no-cache GL104_trainer_sequential_tanh_severity.py
"""
import torch
import torch.nn as nn
from gradlint.testing import raises, silently_wrong
MODIFIED = "modified by an inplace operation"


class _PreviewTrainer:
    def setup(self):
        torch.manual_seed(0)
        self.model = nn.Sequential(nn.Linear(3, 3), nn.Tanh())
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)

    def fit(self, x, epochs):
        for _ in range(epochs):
            self.opt.zero_grad()
            out = self.model(x)
            preview = out.detach()
            preview.round_()  # error: GL104
            loss = (out ** 2).mean()
            loss.backward()
            self.opt.step()


@raises(RuntimeError, MODIFIED)
def bad_trainer_state_set_in_setup():
    trainer = _PreviewTrainer()
    trainer.setup()
    trainer.fit(torch.randn(4, 3), 2)


if __name__ == "__main__":
    import traceback
    try:
        print("result:", bad_trainer_state_set_in_setup())
    except Exception:
        traceback.print_exc()
