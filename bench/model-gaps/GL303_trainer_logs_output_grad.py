"""GL303 recall gap (method using state set in setup()): fit() reads out.grad where
out = self.model(x), self.model bound in setup(). None, so .norm() raises AttributeError.
gradlint reports nothing (also missed when setup() binds a plain leaf self.w and fit() reads
(self.w * 2).grad through a local)."""

import copy
import torch
import torch.nn as nn
from gradlint.testing import raises, silently_wrong, warns
GRAD_WARNING = "is not a leaf Tensor is being accessed"
NONE_NORM = "'NoneType' object has no attribute 'norm'"


class _Trainer:
    def setup(self):
        torch.manual_seed(0)
        self.model = nn.Linear(3, 1)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)
        self.grad_norms = []

    def fit(self, x):
        for _ in range(2):
            self.opt.zero_grad()
            out = self.model(x)
            out.pow(2).mean().backward()
            self.grad_norms.append(out.grad.norm())  # error: GL303
            self.opt.step()

    def fit_logging_parameters(self, x):
        for _ in range(2):
            self.opt.zero_grad()
            out = self.model(x)
            out.pow(2).mean().backward()
            self.grad_norms.append(self.model.weight.grad.norm())
            self.opt.step()


@warns(UserWarning, GRAD_WARNING)
@raises(AttributeError, NONE_NORM)
def bad_trainer_logs_output_grad():
    trainer = _Trainer()
    trainer.setup()
    trainer.fit(torch.ones(4, 3))


if __name__ == "__main__":
    import warnings
    warnings.simplefilter("always")
    try:
        result = globals()["bad_trainer_logs_output_grad"]()  # not a direct call: gradlint would walk it again
        if isinstance(result, tuple) and len(result) == 2:
            print("actual:", result[0], "| expected:", result[1])
        else:
            print("returned:", result)
    except Exception as e:
        print(type(e).__name__ + ":", e)
