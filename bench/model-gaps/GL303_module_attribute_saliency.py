"""GL303 recall gap (module attribute): forward() stores self.weights = softmax(...); after
backward, model.weights.grad is None (torch warns). gradlint reports nothing for the attribute
bound in forward() (found when the attribute is bound in the same function that reads it)."""

import copy
import torch
import torch.nn as nn
from gradlint.testing import raises, silently_wrong, warns
GRAD_WARNING = "is not a leaf Tensor is being accessed"
NONE_NORM = "'NoneType' object has no attribute 'norm'"


class _Attention(nn.Module):
    def __init__(self, keep=False):
        super().__init__()
        self.score = nn.Linear(3, 1)
        self.keep = keep

    def forward(self, x):
        self.weights = torch.softmax(self.score(x), dim=0)
        if self.keep:
            self.weights.retain_grad()
        return (self.weights * x).sum(0)


@warns(UserWarning, GRAD_WARNING)
@silently_wrong
def bad_module_attribute_saliency():
    torch.manual_seed(0)
    model = _Attention()
    model(torch.randn(5, 3)).sum().backward()
    return model.weights.grad, "the attention weights' gradient"  # error: GL303


if __name__ == "__main__":
    import warnings
    warnings.simplefilter("always")
    try:
        result = globals()["bad_module_attribute_saliency"]()  # not a direct call: gradlint would walk it again
        if isinstance(result, tuple) and len(result) == 2:
            print("actual:", result[0], "| expected:", result[1])
        else:
            print("returned:", result)
    except Exception as e:
        print(type(e).__name__ + ":", e)
