# Source: https://github.com/NVIDIA/flownet2-pytorch/pull/207
# Category: legacy-autograd-function
# Expect: raises RuntimeError: Legacy autograd function with non-static forward method is deprecated
"""FlowNetC's correlation layer wraps a CUDA extension in an old-style autograd Function: the layer parameters go to
the Function's __init__, forward/backward are instance methods, and the Module calls an instance; current torch
rejects such Functions. The fix PR makes forward/backward static (parameters passed through ctx) and calls
CorrelationFunction.apply. The extension kernels are replaced by torch code here."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd import Function

torch.manual_seed(0)


def correlation_forward(input1, input2, max_displacement):
    """What correlation_cuda.forward computes: the channel-mean product of input1 with shifted input2."""
    d = max_displacement
    padded = F.pad(input2, (d, d, d, d))
    h, w = input1.shape[-2:]
    out = [(input1 * padded[:, :, i:i + h, j:j + w]).mean(1) for i in range(2 * d + 1) for j in range(2 * d + 1)]
    return torch.stack(out, 1)


class CorrelationFunction(Function):

    def __init__(self, pad_size=1, kernel_size=1, max_displacement=1, stride1=1, stride2=1, corr_multiply=1):
        super(CorrelationFunction, self).__init__()
        self.pad_size = pad_size
        self.max_displacement = max_displacement

    def forward(self, input1, input2):  # BUG: legacy-autograd-function
        self.save_for_backward(input1, input2)
        with torch.no_grad():
            return correlation_forward(input1, input2, self.max_displacement)

    def backward(self, grad_output):
        input1, input2 = self.saved_tensors
        with torch.enable_grad():
            a, b = input1.detach().requires_grad_(), input2.detach().requires_grad_()
            grad_input1, grad_input2 = torch.autograd.grad(correlation_forward(a, b, self.max_displacement), (a, b), grad_output)
        return grad_input1, grad_input2


class Correlation(nn.Module):
    def __init__(self, pad_size=1, kernel_size=1, max_displacement=1, stride1=1, stride2=1, corr_multiply=1):
        super(Correlation, self).__init__()
        self.pad_size = pad_size
        self.kernel_size = kernel_size
        self.max_displacement = max_displacement
        self.stride1, self.stride2, self.corr_multiply = stride1, stride2, corr_multiply

    def forward(self, input1, input2):
        result = CorrelationFunction(self.pad_size, self.kernel_size, self.max_displacement, self.stride1,
                                     self.stride2, self.corr_multiply)(input1, input2)
        return result


class FlowNetC(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.corr = Correlation(max_displacement=1)
        self.predict_flow = nn.Conv2d(9, 2, 3, padding=1)

    def forward(self, img1, img2):
        return self.predict_flow(F.leaky_relu(self.corr(self.conv(img1), self.conv(img2)), 0.1))


model = FlowNetC()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
img1, img2, flow_gt = torch.randn(2, 3, 12, 12), torch.randn(2, 3, 12, 12), torch.randn(2, 2, 12, 12)
loss = (model(img1, img2) - flow_gt).norm(dim=1).mean()
loss.backward()
optimizer.step()
print("EPE loss", loss.item())
