# Source: https://github.com/Lightning-AI/pytorch-lightning/issues/591
# Category: cross-loss-grad-leak
# Expect: silent: the trainer zeroes each optimizer's gradients only after its step, so the generator loss's backward leaves gradients in the discriminator, and the discriminator step applies them on top of its own loss's gradient
"""Early Lightning ran one training_step per optimizer and called optimizer.step() then optimizer.zero_grad() for
that optimizer only. In a GAN the generator loss back-propagates through the discriminator, so the discriminator's
parameters enter their own step with the generator-step gradients still in .grad ("any kind of GAN training is
impossible"); the fix proposed in the thread clears them before each optimizer's backward (Lightning later also
toggled the other optimizers' parameters off)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class GAN(nn.Module):
    def __init__(self, latent_dim=8):
        super().__init__()
        self.latent_dim = latent_dim
        self.generator = nn.Sequential(nn.Linear(latent_dim, 32), nn.ReLU(), nn.Linear(32, 16))
        self.discriminator = nn.Sequential(nn.Linear(16, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1))

    def training_step(self, batch, optimizer_idx):
        z = torch.randn(batch.shape[0], self.latent_dim)
        if optimizer_idx == 0:
            fake = self.generator(z)
            return F.binary_cross_entropy_with_logits(self.discriminator(fake), torch.ones(batch.shape[0], 1))
        fake = self.generator(z).detach()
        real_loss = F.binary_cross_entropy_with_logits(self.discriminator(batch), torch.ones(batch.shape[0], 1))
        fake_loss = F.binary_cross_entropy_with_logits(self.discriminator(fake), torch.zeros(batch.shape[0], 1))
        return (real_loss + fake_loss) / 2

    def configure_optimizers(self):
        return [torch.optim.Adam(self.generator.parameters(), lr=2e-4),
                torch.optim.Adam(self.discriminator.parameters(), lr=2e-4)]


class Trainer:
    def __init__(self):
        self.d_grad_used, self.d_grad_own = [], []

    def fit(self, model, dataloader):
        optimizers = model.configure_optimizers()
        for batch in dataloader:
            for opt_idx, optimizer in enumerate(optimizers):
                torch.manual_seed(len(self.d_grad_used) * 2 + opt_idx)
                loss = model.training_step(batch, opt_idx)
                if opt_idx == 1:
                    self.d_grad_own.append(torch.autograd.grad(loss, list(model.discriminator.parameters()), retain_graph=True)[-2])
                loss.backward()
                if opt_idx == 1:
                    self.d_grad_used.append(model.discriminator[2].weight.grad.clone())
                optimizer.step()
                optimizer.zero_grad()  # BUG: cross-loss-grad-leak


model = GAN()
trainer = Trainer()
trainer.fit(model, [torch.randn(16, 16) for _ in range(3)])
gap = max((u - o).abs().max().item() for u, o in zip(trainer.d_grad_used, trainer.d_grad_own))
print("max |discriminator grad stepped - d_loss gradient| =", gap)
assert gap > 1e-6
print("EVIDENCE: the discriminator steps on its own gradient plus the generator loss's")
