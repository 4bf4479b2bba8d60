# Source: https://github.com/jacobgil/pytorch-grad-cam/issues/71
# Category: graph-kept-alive
# Expect: silent: the forward hook appends the target layer's raw output (still attached to the model's graph) to a list that is never cleared, so every CAM computed in the loop leaves its activation tensor and graph nodes on the device until memory runs out
"""pytorch-grad-cam's ActivationsAndGradients once stored `self.activations.append(output)` in its forward hook;
the output carries the autograd graph of the forward, and the list grew across calls, so running CAM over a dataset
ran out of device memory. The fix stores a detached copy (`output.cpu().detach()`)."""
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
        self.activations.append(output)  # BUG: graph-kept-alive

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
assert len(kept) == 6
print("EVIDENCE: the hook's list keeps", len(kept), "graph-attached activations, one per CAM computed")
