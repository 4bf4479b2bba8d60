"""GL702 false alarm (debatable): a custom Function's forward updates a running-statistics buffer passed as an input (running_mean.mul_(0.9).add_(mean, alpha=0.1)), as batch_norm does; the buffer does not require grad, is not saved for backward and is not an output, so mark_dirty() does not apply (it is for inputs returned as outputs). Output, gradient and running mean are all right; gradlint reports the in-place update as an input mutated without mark_dirty."""

import torch
import torch.nn as nn

from gradlint.testing import silently_wrong


class _BatchCenter(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, running_mean):
        mean = x.mean(0)
        running_mean.mul_(0.9).add_(mean, alpha=0.1)  # running statistics, like batch_norm's
        return x - mean

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output - grad_output.mean(0), None


class _BatchCentering(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("running_mean", torch.zeros(2))

    def forward(self, x):
        return _BatchCenter.apply(x, self.running_mean)


def good_running_statistics_buffer_updated_in_forward():
    model = _BatchCentering()
    x = torch.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    model(x).pow(2).sum().backward()
    return (model.running_mean, x.grad), (torch.tensor([0.2, 0.3]), torch.tensor([[-2.0, -2.0], [2.0, 2.0]]))



def _show(fn):
    try:
        print(fn.__name__, "->", fn())
    except Exception as e:
        print(fn.__name__, "-> raised", type(e).__name__ + ":", str(e).splitlines()[0])


if __name__ == "__main__":
    _show(good_running_statistics_buffer_updated_in_forward)

