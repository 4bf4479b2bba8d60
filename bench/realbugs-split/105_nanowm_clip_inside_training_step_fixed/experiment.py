"""The world-model experiment: the model and its training step."""
import torch
import torch.nn as nn
import torch.nn.functional as F

from utils import clip_grad_norm_


class TinyDiT(nn.Module):
    def __init__(self, ch=4):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(ch + 1, 16, 3, padding=1), nn.SiLU(), nn.Conv2d(16, ch, 3, padding=1))

    def forward(self, x, t):
        tt = t.view(-1, 1, 1, 1).expand(x.shape[0], 1, x.shape[2], x.shape[3]).float() / 1000
        return self.net(torch.cat([x, tt], 1))


class TrainExperiment(nn.Module):
    """Stands in for the LightningModule: training_step returns the loss, the trainer does the rest."""

    def __init__(self, gradient_clip_norm=0.1, gradient_clip_start_step=0):
        super().__init__()
        self.vae = nn.Conv2d(3, 4, 4, stride=4).requires_grad_(False)
        self.model = TinyDiT()
        self.gradient_clip_norm = gradient_clip_norm
        self.gradient_clip_start_step = gradient_clip_start_step
        self.global_step = 0
        self.logged = []

    def training_step(self, batch, batch_idx):
        x = batch["video"]
        with torch.no_grad():
            x = self.vae(x)
        t = torch.randint(0, 1000, (x.shape[0],))
        noise = torch.randn_like(x)
        x_t = x + noise * (t.view(-1, 1, 1, 1) / 1000)
        loss = F.mse_loss(self.model(x_t, t), noise) * 50
        return loss

    def configure_gradient_clipping(self, optimizer):
        if self.global_step < self.gradient_clip_start_step:
            gradient_norm = clip_grad_norm_(self.model.parameters(), self.gradient_clip_norm, clip_grad=False)
        else:
            gradient_norm = clip_grad_norm_(self.model.parameters(), self.gradient_clip_norm, clip_grad=True)
        self.logged.append(float(gradient_norm))

    def configure_optimizers(self):
        return torch.optim.AdamW(self.model.parameters(), lr=1e-4, weight_decay=0)
