# Source: https://github.com/milesial/Pytorch-UNet/issues/468
# Category: clip-scaled-grads
# Expect: ok
"""The UNet AMP training loop with the fix of the report: grad_scaler.unscale_(optimizer) before clip_grad_norm_,
so the clip sees the true gradients and the optimizer steps with a gradient norm of at most gradient_clipping."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class DoubleConv(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.double_conv = nn.Sequential(
            nn.Conv2d(in_channels, out_channels, 3, padding=1), nn.ReLU(),
            nn.Conv2d(out_channels, out_channels, 3, padding=1), nn.ReLU())

    def forward(self, x):
        return self.double_conv(x)


class UNet(nn.Module):
    def __init__(self, n_channels, n_classes):
        super().__init__()
        self.inc = DoubleConv(n_channels, 8)
        self.down = DoubleConv(8, 16)
        self.up = nn.ConvTranspose2d(16, 8, 2, stride=2)
        self.outc = nn.Conv2d(16, n_classes, 1)

    def forward(self, x):
        x1 = self.inc(x)
        x2 = self.down(F.max_pool2d(x1, 2))
        return self.outc(torch.cat([x1, self.up(x2)], dim=1))


def train_model(model, batches, learning_rate=1e-2, amp=True, gradient_clipping=1.0):
    optimizer = torch.optim.SGD(model.parameters(), lr=learning_rate, momentum=0.0)
    grad_scaler = torch.amp.GradScaler("cpu", enabled=amp)
    criterion = nn.CrossEntropyLoss()
    used_norms = []
    model.train()
    for images, true_masks in batches:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
            masks_pred = model(images)
            loss = criterion(masks_pred, true_masks)
        optimizer.zero_grad(set_to_none=True)
        grad_scaler.scale(loss).backward()
        grad_scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), gradient_clipping)
        grad_scaler.step(optimizer)
        grad_scaler.update()
        used_norms.append(torch.norm(torch.stack([p.grad.norm() for p in model.parameters()])).item())
    return used_norms


batches = [(torch.randn(2, 3, 16, 16), torch.randint(0, 2, (2, 16, 16))) for _ in range(3)]
norms = train_model(UNet(3, 2), batches)
print("gradient norm seen by the optimizer:", [f"{n:.2e}" for n in norms])
assert 1e-2 < max(norms) <= 1.0 + 1e-4
