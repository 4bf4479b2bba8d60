# Source: https://github.com/KamitaniLab/bdpy/issues/72
# Source: https://github.com/KamitaniLab/bdpy/pull/91
# Category: hook-not-removed
# Expect: silent: every reconstruct() call registers new forward hooks on the shared encoder and never removes them, so old extractors' hooks keep firing and keep storing graph-attached features from every later forward
"""An image-reconstruction routine builds a FeatureExtractor (forward hooks on the chosen encoder layers, detach=False
so the features stay differentiable) and optimizes the input image; the extractor is dropped when reconstruct()
returns but its hooks stay registered on the encoder. Reusing one encoder for many images piles up hooks, each
storing the outputs (with their graphs) of every later forward. The fix PR removes the hooks in a destructor."""
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
        for name in layers:
            handle = FeatureExtractorHandle(detach=detach)
            self._handles[name] = handle
            encoder.get_submodule(name).register_forward_hook(handle)  # BUG: hook-not-removed

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
stale = [h for h in encoder[0]._forward_hooks.values()][:-1]
stored = sum(len(h.outputs) for h in stale)
print("hooks on layer 0:", n_hooks, " outputs held by the hooks of finished reconstructions:", stored)
assert n_hooks == len(targets) and stored > 0 and all(o.grad_fn is not None for h in stale for o in h.outputs)
print("EVIDENCE:", n_hooks, "forward hooks on one layer after", len(targets),
      "reconstructions; stale ones hold", stored, "graph-attached outputs")
