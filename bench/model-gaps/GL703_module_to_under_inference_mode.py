"""GL703 recall: model = model.to(torch.float64) under inference_mode converts every parameter to an inference tensor (a dtype change makes new tensors): training the two-layer model then raises RuntimeError (Inference tensors cannot be saved for backward: head.weight is saved for the encoder's gradient); a single nn.Linear instead trains silently wrong (weight.grad stays None, the bias trains). Not reported (only a module constructed under inference_mode is)."""

import torch
import torch.nn as nn

from gradlint.testing import raises

INFERENCE = "Inference tensors cannot be saved for backward"


class _EncoderHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Linear(3, 3)
        self.head = nn.Linear(3, 1)

    def forward(self, x):
        return self.head(self.encoder(x))


@raises(RuntimeError, INFERENCE)
def bad_module_converted_with_to_under_inference_mode():
    torch.manual_seed(0)
    model = _EncoderHead()
    with torch.inference_mode():
        model = model.to(torch.float64)  # expected error: GL703 (gradlint: see header)
    model(torch.randn(4, 3, dtype=torch.float64)).sum().backward()



def _show(fn):
    try:
        print(fn.__name__, "->", fn())
    except Exception as e:
        print(fn.__name__, "-> raised", type(e).__name__ + ":", str(e).splitlines()[0])


if __name__ == "__main__":
    _show(bad_module_converted_with_to_under_inference_mode)

