"""GL402 recall gap (method using state set in setup()): fit() appends self.w.grad to
self.grads after zero_grad(set_to_none=False) each step; all entries are the same tensor.
gradlint reports nothing (self.w and self.opt are bound in setup(), not in fit())."""

import torch
import torch.nn as nn
from gradlint.testing import silently_wrong


class _GradLogger:
    def setup(self, copy_grads=False):
        self.w = torch.ones(2, requires_grad=True)
        self.opt = torch.optim.SGD([self.w], lr=0.1)
        self.copy_grads = copy_grads
        self.grads = []

    def fit(self, steps=3):
        for i in range(steps):
            self.opt.zero_grad(set_to_none=False)
            (self.w * (i + 1)).sum().backward()
            if self.copy_grads:
                self.grads.append(self.w.grad.clone())
            else:
                self.grads.append(self.w.grad)  # error: GL402
            self.opt.step()


@silently_wrong
def bad_trainer_keeps_grads():
    trainer = _GradLogger()
    trainer.setup()
    trainer.fit()
    return trainer.grads[0], torch.full((2,), 1.0)


if __name__ == "__main__":
    import warnings
    warnings.simplefilter("always")
    try:
        result = globals()["bad_trainer_keeps_grads"]()  # not a direct call: gradlint would walk it again
        if isinstance(result, tuple) and len(result) == 2:
            print("actual:", result[0], "| expected:", result[1])
        else:
            print("returned:", result)
    except Exception as e:
        print(type(e).__name__ + ":", e)
