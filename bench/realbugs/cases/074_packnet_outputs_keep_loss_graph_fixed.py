# Source: https://github.com/TRI-ML/packnet-sfm/pull/51
# Category: graph-kept-alive
# Expect: ok
"""A self-supervised depth trainer appends each training_step output (holding the loss tensor) to a list that is
handed to training_epoch_end; the maintainers' memory-leak fix detaches the loss before appending it."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
device = torch.device("cpu")


class AvgMeter(object):
    def __init__(self, n_max=50):
        self.n_max, self.values = n_max, []

    def __call__(self, value):
        self.values = (self.values + [value])[-self.n_max:]
        return sum(self.values) / len(self.values)


def sample_to_device(batch):
    return {k: v.to(device) for k, v in batch.items()}


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


class HorovodTrainer(object):
    def __init__(self, max_epochs=1):
        self.max_epochs = max_epochs
        self.avg_loss = AvgMeter(50)

    def fit(self, module, train_dataloader):
        module = module.to(device)
        module.configure_optimizers()
        optimizer, scheduler = module.optimizer, module.scheduler
        for epoch in range(module.current_epoch, self.max_epochs):
            self.last_outputs, self.epoch_result = self.train(train_dataloader, module, optimizer)
            module.current_epoch += 1
            scheduler.step()

    def train(self, dataloader, module, optimizer):
        module.train()
        outputs = []
        for i, batch in enumerate(dataloader):
            optimizer.zero_grad()
            batch = sample_to_device(batch)
            output = module.training_step(batch, i)
            output['loss'].backward()
            optimizer.step()
            output['loss'] = output['loss'].detach()
            outputs.append(output)
            self.avg_loss(output['loss'].item())
        return outputs, module.training_epoch_end(outputs)


dataloader = [{'rgb': torch.rand(2, 3, 16, 16), 'rgb_context': torch.rand(2, 3, 16, 16)} for _ in range(6)]
trainer = HorovodTrainer(max_epochs=1)
trainer.fit(ModelWrapper(), dataloader)

assert all(o['loss'].grad_fn is None and not o['loss'].requires_grad for o in trainer.last_outputs)
assert not trainer.epoch_result['avg_train-loss'].requires_grad
print("OK: stored step losses are detached; epoch average", round(trainer.epoch_result['avg_train-loss'].item(), 4))
