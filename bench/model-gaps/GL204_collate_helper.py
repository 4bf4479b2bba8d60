"""Fixture gap from GL204_tensor_copy_construct.py: bad_collate_helper_in_training_loop -- bad (gradlint should report the marked line).

Missed: _collate(batch) does torch.tensor(batch) and is called in the training loop with torch.randn(4, 3); torch warns 'To copy construct from a tensor ...' on every call. gradlint walks calls within a file but does not report the helper's torch.tensor() of a tensor argument (that does not require grad).

Run: python3 GL204_collate_helper.py   (shows what torch does);  gradlint check --no-cache GL204_collate_helper.py
"""
import torch
import torch.nn as nn
from gradlint.testing import silently_wrong, warns
COPY = "To copy construct from a tensor"


def _collate(batch):
    return torch.tensor(batch)  # warning: GL204


@warns(UserWarning, COPY)
def bad_collate_helper_in_training_loop():
    torch.manual_seed(0)
    model = nn.Linear(3, 1)
    for epoch in range(2):
        x = _collate(torch.randn(4, 3))
        model(x).sum().backward()


if __name__ == "__main__":
    import traceback
    try:
        print("result:", bad_collate_helper_in_training_loop())
    except Exception:
        traceback.print_exc()
