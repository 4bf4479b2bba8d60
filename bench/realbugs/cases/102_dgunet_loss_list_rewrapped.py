# Source: https://github.com/MC-E/Deep-Generalized-Unfolding-Networks-for-Image-Restoration/issues/6
# Category: loss-rewrap
# Expect: silent: torch.tensor([...], requires_grad=True) builds a fresh leaf from the stage losses, so backward never reaches the network and the weights never change
"""Deblurring training sums the Charbonnier and edge losses of every unfolding stage; np.sum over the
list failed on the user's setup, so they rebuilt it as torch.tensor([...], requires_grad=True).sum(),
after which training ran but PSNR never changed."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
device = torch.device("cpu")


class CharbonnierLoss(nn.Module):
    def __init__(self, eps=1e-3):
        super().__init__()
        self.eps = eps

    def forward(self, x, y):
        diff = x - y
        return torch.mean(torch.sqrt(diff * diff + self.eps * self.eps))


class EdgeLoss(nn.Module):
    def __init__(self):
        super().__init__()
        k = torch.tensor([[0.05, 0.25, 0.4, 0.25, 0.05]])
        self.kernel = torch.matmul(k.t(), k).unsqueeze(0).repeat(3, 1, 1, 1)
        self.loss = CharbonnierLoss()

    def conv_gauss(self, img):
        img = F.pad(img, (2, 2, 2, 2), mode="replicate")
        return F.conv2d(img, self.kernel, groups=3)

    def laplacian_kernel(self, current):
        filtered = self.conv_gauss(current)
        down = filtered[:, :, ::2, ::2]
        new_filter = torch.zeros_like(filtered)
        new_filter[:, :, ::2, ::2] = down * 4
        filtered = self.conv_gauss(new_filter)
        return current - filtered

    def forward(self, x, y):
        return self.loss(self.laplacian_kernel(x), self.laplacian_kernel(y))


class DGUNet(nn.Module):
    """Three unfolding stages, each refining the previous estimate; returns every stage's output."""

    def __init__(self, n_feat=8, stages=3):
        super().__init__()
        self.stages = nn.ModuleList(
            nn.Sequential(nn.Conv2d(6, n_feat, 3, padding=1), nn.PReLU(), nn.Conv2d(n_feat, 3, 3, padding=1))
            for _ in range(stages))

    def forward(self, img):
        outs, x = [], img
        for stage in self.stages:
            x = x + stage(torch.cat([x, img], 1))
            outs.append(x)
        return outs[::-1]


model_restoration = DGUNet().to(device)
optimizer = torch.optim.Adam(model_restoration.parameters(), lr=2e-4, betas=(0.9, 0.999), eps=1e-8)
criterion_char = CharbonnierLoss()
criterion_edge = EdgeLoss()

before = [p.detach().clone() for p in model_restoration.parameters()]
model_restoration.train()
for epoch in range(2):
    epoch_loss = 0
    for i in range(3):
        target = torch.rand(2, 3, 16, 16).to(device)
        input_ = (target + 0.1 * torch.randn_like(target)).to(device)

        for param in model_restoration.parameters():
            param.grad = None
        restored = model_restoration(input_)

        loss_char = torch.tensor([criterion_char(restored[j], target) for j in range(len(restored))], requires_grad=True).sum()  # BUG: loss-rewrap
        loss_edge = torch.tensor([criterion_edge(restored[j], target) for j in range(len(restored))], requires_grad=True).sum()  # BUG: loss-rewrap
        loss = (loss_char) + (0.05 * loss_edge)

        loss.backward()
        optimizer.step()
        epoch_loss += loss.item()
    print("epoch", epoch, "loss %.4f" % epoch_loss)

unchanged = all(torch.equal(b, p) for b, p in zip(before, model_restoration.parameters()))
assert unchanged
assert all(p.grad is None for p in model_restoration.parameters())
print("EVIDENCE: after 6 steps every parameter is bit-identical and has grad None; the loss was a fresh leaf")
