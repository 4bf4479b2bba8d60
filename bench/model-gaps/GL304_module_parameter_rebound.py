"""GL304 recall gap (module attribute): model.fc.weight = model.fc.weight - 0.1 * model.fc.weight.grad
on an nn.Linear parameter (torch raises TypeError: cannot assign 'torch.FloatTensor' as parameter
'weight'). gradlint reports nothing: m.weight of an nn layer is not taken as a leaf requiring
grad by GL304 (a plain tensor attribute m.t = torch.ones(1, requires_grad=True) is found)."""

import torch
import torch.nn as nn
from gradlint.testing import raises, silently_wrong
NONE_GRAD = "unsupported operand type(s) for *: 'float' and 'NoneType'"


class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 1)

    def forward(self, x):
        return self.fc(x)


@raises(TypeError, "cannot assign 'torch.FloatTensor' as parameter 'weight'")
def bad_module_parameter_rebound():
    torch.manual_seed(0)
    model = _Net()
    for step in range(2):
        model(torch.ones(2, 3)).sum().backward()
        with torch.no_grad():
            model.fc.weight = model.fc.weight - 0.1 * model.fc.weight.grad  # error: GL304


if __name__ == "__main__":
    import warnings
    warnings.simplefilter("always")
    try:
        result = globals()["bad_module_parameter_rebound"]()  # not a direct call: gradlint would walk it again
        if isinstance(result, tuple) and len(result) == 2:
            print("actual:", result[0], "| expected:", result[1])
        else:
            print("returned:", result)
    except Exception as e:
        print(type(e).__name__ + ":", e)
