"""GL304 recall gap (method using state set outside __init__): setup() binds self.w as a leaf,
fit() does self.w = self.w - lr * self.w.grad in its loop; iteration two raises TypeError (None
grad). gradlint reports nothing (found when self.w is bound in the same method as the loop)."""

import torch
import torch.nn as nn
from gradlint.testing import raises, silently_wrong
NONE_GRAD = "unsupported operand type(s) for *: 'float' and 'NoneType'"


class _Trainer:
    def setup(self):
        self.w = torch.zeros(3, requires_grad=True)
        self.lr = 0.1

    def fit(self, x):
        for _ in range(2):
            loss = ((self.w * x - 1) ** 2).sum()
            loss.backward()
            self.w = self.w - self.lr * self.w.grad  # error: GL304


@raises(TypeError, NONE_GRAD)
def bad_trainer_rebinds_attribute():
    trainer = _Trainer()
    trainer.setup()
    trainer.fit(torch.ones(3))


if __name__ == "__main__":
    import warnings
    warnings.simplefilter("always")
    try:
        result = globals()["bad_trainer_rebinds_attribute"]()  # not a direct call: gradlint would walk it again
        if isinstance(result, tuple) and len(result) == 2:
            print("actual:", result[0], "| expected:", result[1])
        else:
            print("returned:", result)
    except Exception as e:
        print(type(e).__name__ + ":", e)
