# Source: https://github.com/KamitaniLab/bdpy/issues/72
# Source: https://github.com/KamitaniLab/bdpy/pull/91
# Category: hook-not-removed
# Expect: ok
"""The feature extractor with the fix PR: it keeps the RemovableHandle of each hook it registered and removes
exactly those in its destructor, so a finished reconstruction leaves no hook on the shared encoder."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class FeatureExtractorHandle:
    def __init__(self, detach=True):
        self.detach = detach
        self.outputs = []

    def __call__(self, module, inputs, output):
        self.outputs.append(output.detach() if self.detach else output)

    def clear(self):
        self.outputs = []


class FeatureExtractor:
    def __init__(self, encoder, layers, detach=True):
        self._encoder = encoder
        self._layers = layers
        self._handles = {}
        self._hook_handles = []
        for name in layers:
            handle = FeatureExtractorHandle(detach=detach)
            self._handles[name] = handle
            self._hook_handles.append(encoder.get_submodule(name).register_forward_hook(handle))

    def __del__(self):
        for hook_handle in self._hook_handles:
            hook_handle.remove()

    def __call__(self, x):
        for h in self._handles.values():
            h.clear()
        self._encoder(x)
        return {name: h.outputs[-1] for name, h in self._handles.items()}


def reconstruct(features, encoder, layers, n_iter=3, lr=0.1):
    feature_extractor = FeatureExtractor(encoder, layers, detach=False)
    x = torch.zeros(1, 3, 16, 16, requires_grad=True)
    opt = torch.optim.SGD([x], lr=lr)
    for _ in range(n_iter):
        opt.zero_grad()
        feats = feature_extractor(x)
        loss = sum(F.mse_loss(feats[k], features[k]) for k in layers)
        loss.backward()
        opt.step()
    return x.detach()


encoder = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 8, 3, padding=1))
encoder.requires_grad_(False)
layers = ["0", "2"]
with torch.no_grad():
    targets = [{"0": encoder[0](img), "2": encoder(img)} for img in torch.randn(4, 1, 3, 16, 16)]
recons = [reconstruct(t, encoder, layers) for t in targets]

n_hooks = len(encoder[0]._forward_hooks)
print("hooks on layer 0:", n_hooks)
assert n_hooks == 0
