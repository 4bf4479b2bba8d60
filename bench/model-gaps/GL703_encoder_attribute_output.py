"""GL703 recall: feats = model.encoder(x) under inference_mode (a submodule of an nn.Module subclass of the file), then model.head(feats) with grad: RuntimeError. Not reported. Root cause: a module's output computed under torch.inference_mode() (backbone(x), model.encoder(x)) is not treated as an inference tensor; only factory results (torch.randn under inference_mode) are."""

import torch
import torch.nn as nn

from gradlint.testing import raises, silently_wrong


INFERENCE = "Inference tensors cannot be saved for backward"


class _EncoderHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Linear(3, 3)
        self.head = nn.Linear(3, 1)

    def forward(self, x):
        return self.head(self.encoder(x))


@raises(RuntimeError, INFERENCE)
def bad_encoder_attribute_under_inference_mode():
    torch.manual_seed(0)
    model = _EncoderHead()
    with torch.inference_mode():
        feats = model.encoder(torch.randn(4, 3))
    return model.head(feats).sum()  # expected error: GL703 (gradlint: see header)



def _show(fn):
    try:
        print(fn.__name__, "->", fn())
    except Exception as e:
        print(fn.__name__, "-> raised", type(e).__name__ + ":", str(e).splitlines()[0])


if __name__ == "__main__":
    _show(bad_encoder_attribute_under_inference_mode)

