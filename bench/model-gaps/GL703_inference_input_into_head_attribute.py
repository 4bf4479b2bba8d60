"""GL703 recall: an inference tensor (torch.randn under inference_mode) fed to model.head(...), a submodule attribute of an nn.Module subclass of the file: RuntimeError. Not reported; the same tensor fed to a local head = nn.Linear(...) is (calling a layer as a module attribute is not seen as 'a module with parameters')."""

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
def bad_inference_input_into_head_attribute():
    torch.manual_seed(0)
    model = _EncoderHead()
    model.encoder.requires_grad_(False)
    with torch.inference_mode():
        feats = torch.randn(4, 3)
    return model.head(feats).sum()  # expected error: GL703 (gradlint: see header)



def _show(fn):
    try:
        print(fn.__name__, "->", fn())
    except Exception as e:
        print(fn.__name__, "-> raised", type(e).__name__ + ":", str(e).splitlines()[0])


if __name__ == "__main__":
    _show(bad_inference_input_into_head_attribute)

