"""Per-example gradients through module hooks."""
from typing import List

import torch
import torch.nn as nn

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
