# Source: https://github.com/pytorch/vision/issues/4164
# Category: view-inplace-forbidden
# Expect: ok
"""Fixed twin: DenseNet.forward applies the ReLU out of place, so the hooked output is not modified.
A full backward hook on DenseNet's `features` block (to read its gradients for a CAM) wraps the block's output
in the hook's identity Function; DenseNet.forward then applies `F.relu(features, inplace=True)` to that output,
which autograd forbids for a tensor returned by a custom Function. Removing the in-place ReLU in forward (or
hooking the tensor instead of the module) avoids it."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class _DenseLayer(nn.Module):
    def __init__(self, num_input_features, growth_rate=4):
        super().__init__()
        self.norm1 = nn.BatchNorm2d(num_input_features)
        self.conv1 = nn.Conv2d(num_input_features, growth_rate, 3, padding=1, bias=False)

    def forward(self, x):
        return torch.cat([x, self.conv1(F.relu(self.norm1(x)))], 1)


class DenseNet(nn.Module):
    def __init__(self, num_init_features=8, num_classes=10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, num_init_features, 3, padding=1, bias=False),
            _DenseLayer(num_init_features),
            _DenseLayer(num_init_features + 4),
            nn.BatchNorm2d(num_init_features + 8),
        )
        self.classifier = nn.Linear(num_init_features + 8, num_classes)

    def forward(self, x):
        features = self.features(x)
        out = F.relu(features)
        out = F.adaptive_avg_pool2d(out, (1, 1))
        out = torch.flatten(out, 1)
        return self.classifier(out)


model = DenseNet().eval()
grads = {}


def hook_g(module, grad_input, grad_output):
    grads["features"] = grad_output[0]


model.features.register_full_backward_hook(hook_g)
out = model(torch.rand((1, 3, 16, 16), requires_grad=True))
out[0, out.argmax()].backward()
print("CAM gradient shape:", tuple(grads["features"].shape))
assert grads["features"].shape == (1, 16, 16, 16)
