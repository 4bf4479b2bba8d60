"""The depth network and the wrapper that defines a training step."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class DepthNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 1, 3, padding=1))

    def forward(self, rgb):
        return F.softplus(self.net(rgb))


class ModelWrapper(nn.Module):
    def __init__(self):
        super().__init__()
        self.depth_net = DepthNet()
        self.current_epoch = 0

    def configure_optimizers(self):
        self.optimizer = torch.optim.Adam(self.depth_net.parameters(), lr=2e-4)
        self.scheduler = torch.optim.lr_scheduler.StepLR(self.optimizer, step_size=30, gamma=0.5)

    def training_step(self, batch, batch_idx):
        inv_depth = self.depth_net(batch['rgb'])
        photometric = (inv_depth * batch['rgb'].mean(1, keepdim=True) - batch['rgb_context'].mean(1, keepdim=True)).abs().mean()
        smoothness = (inv_depth[..., 1:] - inv_depth[..., :-1]).abs().mean()
        loss = photometric + 0.001 * smoothness
        return {'loss': loss, 'metrics': {'photometric_loss': photometric.item()}}

    def training_epoch_end(self, outputs):
        avg_train_loss = torch.stack([x['loss'] for x in outputs]).mean()
        return {'avg_train-loss': avg_train_loss}
