"""GL601 false alarm: a loop calls a function that builds its OWN model and optimizer and takes
one step (one trial per seed). Nothing accumulates across iterations: every call starts with
fresh parameters whose .grad is None. gradlint follows the call and reports the backward()
inside it as a training loop without zero_grad() (line 16). Found by accident: the
'for fn in [example]: fn()' runner of the other gap files triggered it (with a one-element
list; with two different functions in the list it is not reported)."""

import torch
import torch.nn as nn


def one_trial(seed):
    torch.manual_seed(seed)
    model = nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    model(torch.ones(1, 2)).sum().backward()
    optimizer.step()
    return model.weight.grad.clone()


if __name__ == "__main__":
    grads = []
    for seed in range(3):
        grads.append(one_trial(seed))
    # every trial's gradient is the fresh one (d/dW of W @ [1, 1] + b = [1, 1]), never a sum
    assert all(torch.equal(g, torch.ones(1, 2)) for g in grads)
    print(grads)
