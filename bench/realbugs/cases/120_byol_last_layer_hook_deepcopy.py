# Source: https://github.com/lucidrains/byol-pytorch/pull/20
# Category: deepcopy-non-leaf
# Expect: raises RuntimeError: Only Tensors created explicitly by the user (graph leaves) support the deepcopy protocol
"""BYOL wraps the backbone in a NetWrapper that grabs a hidden layer through a forward hook; with hidden_layer=-1
the hook is still registered, so the last layer's output (a non-leaf) stays on the wrapper and the lazy
copy.deepcopy that builds the target encoder fails."""
import copy
from functools import wraps

import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)


def flatten(t):
    return t.reshape(t.shape[0], -1)


def singleton(cache_key):
    def inner_fn(fn):
        @wraps(fn)
        def wrapper(self, *args, **kwargs):
            instance = getattr(self, cache_key)
            if instance is not None:
                return instance
            instance = fn(self, *args, **kwargs)
            setattr(self, cache_key, instance)
            return instance
        return wrapper
    return inner_fn


def loss_fn(x, y):
    x = F.normalize(x, dim=-1, p=2)
    y = F.normalize(y, dim=-1, p=2)
    return 2 - 2 * (x * y).sum(dim=-1)


class MLP(nn.Module):
    def __init__(self, dim, projection_size, hidden_size=32):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(dim, hidden_size), nn.BatchNorm1d(hidden_size),
                                 nn.ReLU(inplace=True), nn.Linear(hidden_size, projection_size))

    def forward(self, x):
        return self.net(x)


class NetWrapper(nn.Module):
    def __init__(self, net, projection_size, projection_hidden_size, layer=-2):
        super().__init__()
        self.net = net
        self.layer = layer
        self.projector = None
        self.projection_size = projection_size
        self.projection_hidden_size = projection_hidden_size
        self.hidden = None
        self.hook_registered = False

    def _find_layer(self):
        children = [*self.net.children()]
        return children[self.layer]

    def _hook(self, _, __, output):
        self.hidden = flatten(output)

    def _register_hook(self):
        layer = self._find_layer()
        layer.register_forward_hook(self._hook)
        self.hook_registered = True

    @singleton('projector')
    def _get_projector(self, hidden):
        _, dim = hidden.shape
        return MLP(dim, self.projection_size, self.projection_hidden_size).to(hidden)

    def get_representation(self, x):
        if not self.hook_registered:  # BUG: deepcopy-non-leaf
            self._register_hook()

        if self.layer == -1:
            return self.net(x)

        _ = self.net(x)
        hidden = self.hidden
        self.hidden = None
        return hidden

    def forward(self, x):
        representation = self.get_representation(x)
        projector = self._get_projector(representation)
        return projector(representation)


class BYOL(nn.Module):
    def __init__(self, net, image_size, hidden_layer=-2, projection_size=16, projection_hidden_size=32):
        super().__init__()
        self.augment = lambda x: x + 0.1 * torch.randn_like(x)
        self.online_encoder = NetWrapper(net, projection_size, projection_hidden_size, layer=hidden_layer)
        self.target_encoder = None
        self.online_predictor = MLP(projection_size, projection_size, projection_hidden_size)
        # send a mock image tensor to instantiate singleton parameters
        self.forward(torch.randn(2, 3, image_size, image_size))

    @singleton('target_encoder')
    def _get_target_encoder(self):
        return copy.deepcopy(self.online_encoder)

    def forward(self, x):
        image_one, image_two = self.augment(x), self.augment(x)
        online_pred_one = self.online_predictor(self.online_encoder(image_one))
        online_pred_two = self.online_predictor(self.online_encoder(image_two))
        with torch.no_grad():
            target_encoder = self._get_target_encoder()
            target_proj_one = target_encoder(image_one)
            target_proj_two = target_encoder(image_two)
        loss_one = loss_fn(online_pred_one, target_proj_two.detach())
        loss_two = loss_fn(online_pred_two, target_proj_one.detach())
        return (loss_one + loss_two).mean()


net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 10))
learner = BYOL(net, image_size=8, hidden_layer=-1)
opt = torch.optim.Adam(learner.parameters(), lr=3e-4)
for _ in range(2):
    loss = learner(torch.randn(4, 3, 8, 8))
    opt.zero_grad()
    loss.backward()
    opt.step()
print("loss", loss.item())
