"""GL703 recall: a helper _extract(backbone, x) returns backbone(x) computed under inference_mode; the training loop feeds it to head(...): RuntimeError at the head line. Not reported. Root cause: a module's output computed under torch.inference_mode() (backbone(x), model.encoder(x)) is not treated as an inference tensor; only factory results (torch.randn under inference_mode) are."""

import torch
import torch.nn as nn

from gradlint.testing import raises, silently_wrong


INFERENCE = "Inference tensors cannot be saved for backward"


def _extract(backbone, x):
    with torch.inference_mode():
        return backbone(x)


@raises(RuntimeError, INFERENCE)
def bad_helper_extracts_features_under_inference_mode():
    torch.manual_seed(0)
    backbone, head = nn.Linear(3, 3), nn.Linear(3, 1)
    optimizer = torch.optim.SGD(head.parameters(), lr=0.1)
    for epoch in range(2):
        optimizer.zero_grad()
        loss = head(_extract(backbone, torch.randn(4, 3))).sum()  # expected error: GL703 (gradlint: see header)
        loss.backward()
        optimizer.step()



def _show(fn):
    try:
        print(fn.__name__, "->", fn())
    except Exception as e:
        print(fn.__name__, "-> raised", type(e).__name__ + ":", str(e).splitlines()[0])


if __name__ == "__main__":
    _show(bad_helper_extracts_features_under_inference_mode)

