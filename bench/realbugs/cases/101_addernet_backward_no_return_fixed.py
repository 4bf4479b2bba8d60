# Source: https://github.com/huawei-noah/AdderNet/issues/21
# Category: function-backward-arity
# Expect: ok
"""AdderNet's adder2d layer uses a custom autograd Function whose backward computes grad_W_col and
grad_X_col but never returns them, so training died at the first loss.backward() (a commenter
pointed out the missing `return grad_W_col, grad_X_col`)."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd import Function

torch.manual_seed(0)


def adder2d_function(X, W, stride=1, padding=0):
    n_filters, d_filter, h_filter, w_filter = W.size()
    n_x, d_x, h_x, w_x = X.size()

    h_out = (h_x - h_filter + 2 * padding) / stride + 1
    w_out = (w_x - w_filter + 2 * padding) / stride + 1
    h_out, w_out = int(h_out), int(w_out)

    X_col = F.unfold(X.view(1, -1, h_x, w_x), h_filter, dilation=1, padding=padding, stride=stride)
    X_col = X_col.view(n_x, -1, h_out * w_out).permute(1, 2, 0).contiguous().view(d_filter * h_filter * w_filter, -1)
    W_col = W.view(n_filters, -1)

    out = adder.apply(W_col, X_col)
    out = out.view(n_filters, h_out, w_out, n_x)
    return out.permute(3, 0, 1, 2).contiguous()


class adder(Function):
    @staticmethod
    def forward(ctx, W_col, X_col):
        ctx.save_for_backward(W_col, X_col)
        output = -(W_col.unsqueeze(2) - X_col.unsqueeze(0)).abs().sum(1)
        return output

    @staticmethod
    def backward(ctx, grad_output):
        W_col, X_col = ctx.saved_tensors
        grad_W_col = ((X_col.unsqueeze(0) - W_col.unsqueeze(2)) * grad_output.unsqueeze(1)).sum(2)
        grad_W_col = grad_W_col / grad_W_col.norm(p=2).clamp(min=1e-12) * math.sqrt(W_col.size(1) * W_col.size(0)) / 5
        grad_X_col = (-(X_col.unsqueeze(0) - W_col.unsqueeze(2)).clamp(-1, 1) * grad_output.unsqueeze(1)).sum(0)
        return grad_W_col, grad_X_col


class adder2d(nn.Module):
    def __init__(self, input_channel, output_channel, kernel_size, stride=1, padding=0, bias=False):
        super().__init__()
        self.stride = stride
        self.padding = padding
        self.adder = nn.Parameter(nn.init.normal_(torch.randn(output_channel, input_channel, kernel_size, kernel_size)))
        self.bias = bias
        if bias:
            self.b = nn.Parameter(nn.init.uniform_(torch.zeros(output_channel)))

    def forward(self, x):
        output = adder2d_function(x, self.adder, self.stride, self.padding)
        if self.bias:
            output += self.b.unsqueeze(0).unsqueeze(2).unsqueeze(3)
        return output


class ResNetTiny(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = adder2d(8, 8, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(8)
        self.fc = nn.Conv2d(8, num_classes, 1, bias=False)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.relu(self.bn2(self.conv2(x)))
        x = F.adaptive_avg_pool2d(self.fc(x), 1)
        return x.view(x.size(0), -1)


net = ResNetTiny()
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)


def train(epoch):
    net.train()
    for batch_idx in range(2):
        images = torch.randn(4, 3, 8, 8)
        labels = torch.randint(0, 10, (4,))
        optimizer.zero_grad()
        output = net(images)
        loss = criterion(output, labels)
        loss.backward()
        optimizer.step()
        print("epoch", epoch, "batch", batch_idx, "loss %.4f" % loss.item())


for e in range(1):
    train(e)

assert net.conv2.adder.grad is not None and net.conv1.weight.grad is not None
print("OK: the adder layer and the layer before it both receive gradients")
