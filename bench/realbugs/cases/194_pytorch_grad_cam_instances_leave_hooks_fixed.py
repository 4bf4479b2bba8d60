# Source: https://github.com/jacobgil/pytorch-grad-cam/issues/132
# Category: hook-not-removed
# Expect: ok
"""The loop after the maintainer's fix: each GradCAM is used in a `with` block, whose exit removes its hooks from
the target layer, so nothing piles up and old CAMs stop capturing."""
import torch
import torch.nn as nn

torch.manual_seed(0)


class ActivationsAndGradients:
    def __init__(self, model, target_layer):
        self.model = model
        self.gradients, self.activations = [], []
        self.handles = [target_layer.register_forward_hook(self.save_activation)]

    def save_activation(self, module, input, output):
        self.activations.append(output.detach())
        output.register_hook(self.save_gradient)

    def save_gradient(self, grad):
        self.gradients = [grad.detach()] + self.gradients

    def __call__(self, x):
        self.gradients, self.activations = [], []
        return self.model(x)

    def release(self):
        for handle in self.handles:
            handle.remove()


class GradCAM:
    def __init__(self, model, target_layer):
        self.model = model.eval()
        self.activations_and_grads = ActivationsAndGradients(model, target_layer)

    def __call__(self, input_tensor, target_category):
        output = self.activations_and_grads(input_tensor)
        self.model.zero_grad()
        output[range(len(target_category)), target_category].sum().backward(retain_graph=True)
        acts, grads = self.activations_and_grads.activations[-1], self.activations_and_grads.gradients[-1]
        weights = grads.mean(dim=(2, 3), keepdim=True)
        return torch.relu((weights * acts).sum(1))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.activations_and_grads.release()


model = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(),
                      nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 2))
input = torch.randn(4, 1, 16, 16, requires_grad=True)
labels = [0, 1, 0, 1]
old_cams = []
for i in range(5):
    with GradCAM(model=model, target_layer=model[2]) as cam:
        grad = cam(input_tensor=input, target_category=labels)
        old_cams.append(cam.activations_and_grads)
    del cam, grad
n_hooks = len(model[2]._forward_hooks)
print("forward hooks on the target layer after 5 CAMs:", n_hooks)
assert n_hooks == 0 and len(old_cams[0].activations) == 1
model(torch.randn(1, 1, 16, 16))
assert len(old_cams[0].activations) == 1
