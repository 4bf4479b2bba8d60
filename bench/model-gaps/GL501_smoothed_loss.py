"""Gap: GL501 recall: an EMA-smoothed loss `smoothed = loss if smoothed is None else 0.9 * smoothed + 0.1 * loss` chains every iteration's graph (from iteration two on); gradlint reports nothing."""

import torch
import torch.nn as nn

from gradlint.testing import silently_wrong


def _setup():
    torch.manual_seed(0)
    return nn.Linear(3, 1), torch.randn(4, 3)

@silently_wrong
def bad_smoothed_loss_from_second_iteration():
    model, x = _setup()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    smoothed = None
    for _ in range(3):
        optimizer.zero_grad()
        loss = model(x).pow(2).mean()
        loss.backward()
        optimizer.step()
        smoothed = loss if smoothed is None else 0.9 * smoothed + 0.1 * loss  # expected error: GL501 (not reported)
    return smoothed.grad_fn is None, True


if __name__ == "__main__":
    print(bad_smoothed_loss_from_second_iteration())
