"""GL703 recall: a data helper _load_batch() creates and normalises the batch under inference_mode (torch.randn there, so an inference tensor); the training loop calls head(_load_batch()): RuntimeError. Not reported: the inference tensor returned by a helper function is not followed (the same tensor made inline is reported)."""

import torch
import torch.nn as nn

from gradlint.testing import raises, silently_wrong


INFERENCE = "Inference tensors cannot be saved for backward"


def _load_batch():
    with torch.inference_mode():
        x = torch.randn(4, 3)
        return (x - x.mean(0)) / x.std(0)


@raises(RuntimeError, INFERENCE)
def bad_helper_loads_batch_under_inference_mode():
    torch.manual_seed(0)
    head = nn.Linear(3, 1)
    optimizer = torch.optim.SGD(head.parameters(), lr=0.1)
    for epoch in range(2):
        optimizer.zero_grad()
        loss = head(_load_batch()).sum()  # expected error: GL703 (gradlint: see header)
        loss.backward()
        optimizer.step()



def _show(fn):
    try:
        print(fn.__name__, "->", fn())
    except Exception as e:
        print(fn.__name__, "-> raised", type(e).__name__ + ":", str(e).splitlines()[0])


if __name__ == "__main__":
    _show(bad_helper_loads_batch_under_inference_mode)

