"""GL302 recall gap (module attribute): a tied autoencoder stores self.decoder_weight =
self.encoder.weight.t() in __init__; model.decoder_weight.requires_grad_(False) raises RuntimeError.
gradlint reports nothing (found when the .t() is computed in the same function)."""

import copy
import torch
import torch.nn as nn
import torch.nn.functional as F
from gradlint.testing import raises
ONLY_LEAVES = "you can only change requires_grad flags of leaf variables"


class _TiedAutoencoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Linear(3, 2, bias=False)
        self.decoder_weight = self.encoder.weight.t()

    def forward(self, x):
        return torch.relu(self.encoder(x)) @ self.decoder_weight


@raises(RuntimeError, ONLY_LEAVES)
def bad_module_attribute_tied_weight():
    model = _TiedAutoencoder()
    model.decoder_weight.requires_grad_(False)  # error: GL302


if __name__ == "__main__":
    import warnings
    warnings.simplefilter("always")
    try:
        result = globals()["bad_module_attribute_tied_weight"]()  # not a direct call: gradlint would walk it again
        if isinstance(result, tuple) and len(result) == 2:
            print("actual:", result[0], "| expected:", result[1])
        else:
            print("returned:", result)
    except Exception as e:
        print(type(e).__name__ + ":", e)
