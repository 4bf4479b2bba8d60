# Source: https://github.com/jacobgil/pytorch-grad-cam/issues/132
# Category: hook-not-removed
# Expect: silent: each GradCAM object created in the loop registers a forward hook and a gradient hook on the target layer and never removes them, so hooks pile up on the model and every old CAM keeps capturing activations and gradients of every later call
"""A user recreates the GradCAM object for every batch in a loop and deletes it afterwards; memory still grows,
because the ActivationsAndGradients helper's hooks stay registered on the target layer (the layer references the
old objects, which hold their captured tensors). The maintainer's fix added release() and a `with` statement that
removes the hooks."""
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
    cam = GradCAM(model=model, target_layer=model[2])  # BUG: hook-not-removed
    grad = cam(input_tensor=input, target_category=labels)
    old_cams.append(cam.activations_and_grads)
    del cam, grad
n_hooks = len(model[2]._forward_hooks)
print("forward hooks on the target layer after 5 CAMs:", n_hooks)
assert n_hooks == 5 and len(old_cams[0].activations) == 5
model(torch.randn(1, 1, 16, 16))
assert len(old_cams[0].activations) == 6
print("EVIDENCE:", n_hooks, "hooks stay registered; the first CAM still captures every later forward")
