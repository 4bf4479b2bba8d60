# Source: https://github.com/Trusted-AI/adversarial-robustness-toolbox/pull/1724
# Category: missing-zero-grad
# Expect: silent: the adversarial texture's patch gradient is never cleared between attack iterations, so every update steps along the running sum of all earlier gradients instead of the current one
"""ART's AdversarialTexturePyTorch attack optimises a texture patch (a leaf tensor with requires_grad) by calling
backward on the estimator's loss each training step and applying a signed step from `self._patch.grad`; nothing
zeroes that grad, so it accumulates across iterations (running the attack twice for N steps differed from once for
2N). The fix zeroes the patch gradient after each step."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class AdversarialTexturePyTorch:
    def __init__(self, estimator, patch_height=6, patch_width=6, step_size=0.01, max_iter=5):
        self.estimator, self.step_size, self.max_iter = estimator, step_size, max_iter
        self._patch = torch.full((3, patch_height, patch_width), 0.5, requires_grad=True)
        self.used_grads, self.true_grads = [], []

    def _apply_patch(self, x):
        pad = (0, x.shape[-1] - self._patch.shape[-1], 0, x.shape[-2] - self._patch.shape[-2])
        mask = F.pad(torch.ones_like(self._patch), pad)
        return x * (1 - mask) + F.pad(self._patch, pad) * mask

    def _train_step(self, x, y):
        self.estimator.zero_grad()
        loss = F.cross_entropy(self.estimator(self._apply_patch(x)), y)
        self.true_grads.append(torch.autograd.grad(loss, self._patch, retain_graph=True)[0])
        loss.backward()
        gradients = self._patch.grad  # BUG: missing-zero-grad
        self.used_grads.append(gradients.clone())
        with torch.no_grad():
            self._patch[:] = torch.clamp(self._patch - self.step_size * torch.sign(gradients), 0.0, 1.0)
        return loss

    def generate(self, x, y):
        for _ in range(self.max_iter):
            self._train_step(x, y)
        return self._patch.detach()


estimator = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 5))
x, y = torch.rand(4, 3, 16, 16), torch.randint(0, 5, (4,))
attack = AdversarialTexturePyTorch(estimator)
attack.generate(x, y)
gap = (attack.used_grads[-1] - attack.true_grads[-1]).abs().max().item()
print("last step: |used patch grad - current patch grad| max =", gap)
assert gap > 1e-6 and torch.allclose(attack.used_grads[-1], sum(attack.true_grads), atol=1e-6)
print("EVIDENCE: the patch gradient of step", attack.max_iter, "is the sum of all", attack.max_iter, "steps' gradients")
