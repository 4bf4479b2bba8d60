# Source: https://github.com/cybertronai/autograd-hacks/issues/10
# Category: non-full-backward-hook
# Expect: ok
"""The per-example-gradient helper with the thread's fix: register_full_backward_hook instead of the deprecated
register_backward_hook (torch may still note that the first layer's hook fires on outputs only, since the data
does not require grad)."""
from typing import List

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

_supported_layers = ['Linear']
_hooks_disabled: bool = False


def _layer_type(layer: nn.Module) -> str:
    return layer.__class__.__name__


def add_hooks(model: nn.Module) -> None:
    """Adds hooks to model to save activations and backprop values."""
    global _hooks_disabled
    _hooks_disabled = False
    handles = []
    for layer in model.modules():
        if _layer_type(layer) in _supported_layers:
            handles.append(layer.register_forward_hook(_capture_activations))
            handles.append(layer.register_full_backward_hook(_capture_backprops))
    model.__dict__.setdefault('autograd_hacks_hooks', []).extend(handles)


def _capture_activations(layer: nn.Module, input: List[torch.Tensor], output: torch.Tensor):
    if _hooks_disabled:
        return
    setattr(layer, "activations", input[0].detach())


def _capture_backprops(layer: nn.Module, _input, output):
    if _hooks_disabled:
        return
    if not hasattr(layer, 'backprops_list'):
        setattr(layer, 'backprops_list', [])
    layer.backprops_list.append(output[0].detach())


def compute_grad1(model: nn.Module, loss_type: str = 'mean') -> None:
    """Compute per-example gradients and save them under 'param.grad1'. Must be called after loss.backprop()"""
    for layer in model.modules():
        if _layer_type(layer) not in _supported_layers:
            continue
        A = layer.activations
        n = A.shape[0]
        B = layer.backprops_list[0] * (n if loss_type == 'mean' else 1)
        setattr(layer.weight, 'grad1', torch.einsum('ni,nj->nij', B, A))
        if layer.bias is not None:
            setattr(layer.bias, 'grad1', B)


model = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 3))
add_hooks(model)
data, targets = torch.randn(8, 10), torch.randint(0, 3, (8,))
loss = F.cross_entropy(model(data), targets)
loss.backward()
compute_grad1(model)
for layer in (model[0], model[2]):
    assert torch.allclose(layer.weight.grad1.mean(0), layer.weight.grad, atol=1e-6)
print("per-example gradients shape", tuple(model[0].weight.grad1.shape))
assert model[0].weight.grad1.shape == (8, 16, 10) and len(model[2].backprops_list) == 1
