"""GL703 recall: the next batch's features are prefetched at the end of the loop body with feats = backbone(x) under inference_mode; from the second iteration on head(feats).backward() raises. Not reported (the same loop with feats = torch.randn(...) under inference_mode is). Root cause: a module's output computed under torch.inference_mode() (backbone(x), model.encoder(x)) is not treated as an inference tensor; only factory results (torch.randn under inference_mode) are."""

import torch
import torch.nn as nn

from gradlint.testing import raises, silently_wrong


INFERENCE = "Inference tensors cannot be saved for backward"


@raises(RuntimeError, INFERENCE)
def bad_next_batch_prefetched_under_inference_mode():
    torch.manual_seed(0)
    backbone, head = nn.Linear(3, 3), nn.Linear(3, 1)
    optimizer = torch.optim.SGD(head.parameters(), lr=0.1)
    with torch.no_grad():
        feats = backbone(torch.randn(4, 3))
    for step in range(2):
        optimizer.zero_grad()
        head(feats).sum().backward()  # expected error: GL703 (gradlint: see header)
        optimizer.step()
        with torch.inference_mode():  # prefetch the next batch's features: used from step two on
            feats = backbone(torch.randn(4, 3))



def _show(fn):
    try:
        print(fn.__name__, "->", fn())
    except Exception as e:
        print(fn.__name__, "-> raised", type(e).__name__ + ":", str(e).splitlines()[0])


if __name__ == "__main__":
    _show(bad_next_batch_prefetched_under_inference_mode)

