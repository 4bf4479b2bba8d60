# Source: https://github.com/jacobgil/pytorch-grad-cam/pull/183
# Category: view-inplace-forbidden
# Expect: raises RuntimeError: This view was created inside a custom Function
"""pytorch-grad-cam collected the target layer's gradients with `register_full_backward_hook`. When the next layer
of the model is an in-place ReLU (VGG, mmclassification backbones), it modifies the output that the full backward
hook returned from its identity Function, which autograd forbids. The PR records the gradient with a tensor hook
registered from the forward hook instead (`output.register_hook(...)`)."""
import torch
import torch.nn as nn

torch.manual_seed(0)


class ActivationsAndGradients:
    def __init__(self, model, target_layers):
        self.model = model
        self.gradients = []
        self.activations = []
        self.handles = []
        for target_layer in target_layers:
            self.handles.append(target_layer.register_forward_hook(self.save_activation))
            self.handles.append(target_layer.register_full_backward_hook(self.save_gradient))  # BUG: view-inplace-forbidden

    def save_activation(self, module, input, output):
        self.activations.append(output.detach())

    def save_gradient(self, module, grad_input, grad_output):
        self.gradients = [grad_output[0].detach()] + self.gradients

    def __call__(self, x):
        self.gradients = []
        self.activations = []
        return self.model(x)

    def release(self):
        for handle in self.handles:
            handle.remove()


class GradCAM:
    def __init__(self, model, target_layers):
        self.model = model.eval()
        self.activations_and_grads = ActivationsAndGradients(self.model, target_layers)

    def __call__(self, input_tensor, target_category):
        output = self.activations_and_grads(input_tensor)
        self.model.zero_grad()
        output[:, target_category].sum().backward(retain_graph=True)
        activations = self.activations_and_grads.activations[-1]
        grads = self.activations_and_grads.gradients[-1]
        weights = grads.mean(dim=(2, 3), keepdim=True)
        return torch.relu((weights * activations).sum(1))


features = nn.Sequential(
    nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(inplace=True),
    nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(inplace=True),
    nn.MaxPool2d(2),
)
model = nn.Sequential(features, nn.Flatten(), nn.Linear(8 * 8 * 8, 5))
cam = GradCAM(model=model, target_layers=[features[-3]])
grayscale_cam = cam(torch.rand(2, 3, 16, 16), target_category=1)
print("cam shape:", tuple(grayscale_cam.shape))
