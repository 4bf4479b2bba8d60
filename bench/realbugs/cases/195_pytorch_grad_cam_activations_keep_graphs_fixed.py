# Source: https://github.com/jacobgil/pytorch-grad-cam/issues/71
# Category: graph-kept-alive
# Expect: ok
"""pytorch-grad-cam's forward hook after the fix: it stores a detached CPU copy of the target layer's output, so
no forward graph outlives its CAM."""
import torch
import torch.nn as nn

torch.manual_seed(0)


class ActivationsAndGradients:
    def __init__(self, model, target_layer):
        self.model = model
        self.gradients, self.activations = [], []
        target_layer.register_forward_hook(self.save_activation)
        target_layer.register_full_backward_hook(self.save_gradient)

    def save_activation(self, module, input, output):
        self.activations.append(output.cpu().detach())

    def save_gradient(self, module, grad_input, grad_output):
        self.gradients = [grad_output[0].detach()] + self.gradients

    def __call__(self, x):
        return self.model(x)


class GradCAM:
    def __init__(self, model, target_layer):
        self.model = model.eval()
        self.activations_and_grads = ActivationsAndGradients(model, target_layer)

    def __call__(self, input_tensor, target_category):
        output = self.activations_and_grads(input_tensor)
        self.model.zero_grad()
        output[0, target_category].backward()
        acts = self.activations_and_grads.activations[-1].detach()
        grads = self.activations_and_grads.gradients[0]
        return torch.relu((grads.mean(dim=(2, 3), keepdim=True) * acts).sum(1))


model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(),
                      nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 2))
cam = GradCAM(model=model, target_layer=model[2])
maps = [cam(torch.randn(1, 3, 16, 16), target_category=1) for _ in range(6)]
kept = [a for a in cam.activations_and_grads.activations if a.grad_fn is not None]
print("stored activations still attached to a graph:", len(kept))
assert kept == []
