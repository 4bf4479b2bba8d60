# Source: https://github.com/twosixlabs/armory/issues/1950
# Category: missing-zero-grad
# Expect: ok
"""armory's CARLA patch attack after the fix: the patch's own gradient is cleared before each backward, so every
signed step follows the current iteration's gradient."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class Estimator:
    def __init__(self):
        self._model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 1, 1))

    def compute_loss(self, images, boxes):
        scores = self._model(images).sigmoid()
        return -F.binary_cross_entropy(scores, boxes)


class CARLAAdversarialPatchPyTorch:
    def __init__(self, estimator, patch_shape=(3, 8, 8), learning_rate=0.05, max_iter=4):
        self.estimator, self.learning_rate, self.max_iter = estimator, learning_rate, max_iter
        self._patch = torch.rand(patch_shape, requires_grad=True)
        self.used, self.current = [], []

    def _random_overlay(self, images, patch):
        out = images.clone()
        out[:, :, 4:12, 4:12] = patch
        return out

    def _train_step(self, images, boxes):
        self.estimator._model.zero_grad()
        self._patch.grad = None
        patched = self._random_overlay(images, self._patch)
        loss = self.estimator.compute_loss(patched, boxes)
        self.current.append(torch.autograd.grad(loss, self._patch, retain_graph=True)[0])
        loss.backward(retain_graph=True)
        gradients = self._patch.grad.sign() * self.learning_rate
        self.used.append(self._patch.grad.clone())
        with torch.no_grad():
            self._patch[:] = torch.clamp(self._patch + gradients, 0.0, 1.0)
        return loss

    def generate(self, images, boxes):
        for _ in range(self.max_iter):
            self._train_step(images, boxes)
        return self._patch.detach()


attack = CARLAAdversarialPatchPyTorch(Estimator())
images, boxes = torch.rand(2, 3, 16, 16), (torch.rand(2, 1, 16, 16) > 0.5).float()
attack.generate(images, boxes)
gap = (attack.used[-1] - attack.current[-1]).abs().max().item()
print("last iteration: |patch grad used - current patch grad| max =", gap)
assert gap < 1e-6
