# Source: https://github.com/Lightning-AI/torchmetrics/pull/2093
# Category: graph-kept-alive
# Expect: silent: LPIPS.update adds the per-batch scores to its sum_scores state without detaching them, so when the images come from a model being trained the metric state keeps every batch's graph (CUDA out of memory, issue #2078)
"""torchmetrics' LearnedPerceptualImagePatchSimilarity accumulates `self.sum_scores += loss.sum()` in update().
The images passed in are a generator's outputs during training, so each score carries the generator's graph and
the running sum links all of them until compute()/reset(). The PR detaches the scores before accumulating."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class Metric(nn.Module):
    def __init__(self):
        super().__init__()
        self._defaults = {}

    def add_state(self, name, default):
        self._defaults[name] = default.clone()
        setattr(self, name, default.clone())

    def reset(self):
        for name, default in self._defaults.items():
            setattr(self, name, default.clone())


class _LPIPSNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Conv2d(3, 8, 3, padding=1)
        self.lin = nn.Conv2d(8, 1, 1, bias=False)
        for p in self.parameters():
            p.requires_grad_(False)

    def forward(self, img1, img2):
        f1, f2 = F.normalize(self.features(img1), dim=1), F.normalize(self.features(img2), dim=1)
        return self.lin((f1 - f2) ** 2).mean(dim=(1, 2, 3))


def _lpips_update(img1, img2, net, normalize):
    if normalize:
        img1, img2 = 2 * img1 - 1, 2 * img2 - 1
    loss = net(img1, img2)
    return loss, img1.shape[0]


class LearnedPerceptualImagePatchSimilarity(Metric):
    def __init__(self, normalize=False):
        super().__init__()
        self.net = _LPIPSNet()
        self.normalize = normalize
        self.add_state("sum_scores", torch.tensor(0.0))
        self.add_state("total", torch.tensor(0.0))

    def update(self, img1, img2):
        loss, total = _lpips_update(img1, img2, net=self.net, normalize=self.normalize)
        self.sum_scores += loss.sum()  # BUG: graph-kept-alive
        self.total += total

    def compute(self):
        return self.sum_scores / self.total


generator = nn.Sequential(nn.Conv2d(3, 3, 3, padding=1), nn.Sigmoid())
optimizer = torch.optim.Adam(generator.parameters(), lr=1e-3)
lpips = LearnedPerceptualImagePatchSimilarity(normalize=True)
for step in range(4):
    real = torch.rand(2, 3, 16, 16)
    fake = generator(real + 0.1 * torch.randn_like(real))
    loss = F.l1_loss(fake, real)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    lpips.update(fake, real)

print("LPIPS over the run:", lpips.compute().item())
assert lpips.sum_scores.grad_fn is not None
print("EVIDENCE: the metric state sum_scores has grad_fn", type(lpips.sum_scores.grad_fn).__name__,
      "and keeps the generator graphs of all 4 batches")
