# Source: https://github.com/Lightning-AI/pytorch-lightning/pull/9606
# Category: clip-scaled-grads
# Expect: ok
"""The Lightning-style trainer with the fix PR's order: the plugin unscales the gradients before the loop tracks
their norm and clips them, so the logged norm is the true one and the clip bounds the real update."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class NativeMixedPrecisionPlugin:
    def __init__(self):
        self.scaler = torch.amp.GradScaler("cpu")

    def backward(self, loss):
        self.scaler.scale(loss).backward()

    def pre_optimizer_step(self, optimizer):
        self.scaler.unscale_(optimizer)

    def optimizer_step(self, optimizer):
        self.scaler.step(optimizer)
        self.scaler.update()


class BoringModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = nn.Linear(32, 2)

    def training_step(self, batch):
        return F.mse_loss(self.layer(batch), torch.ones(batch.size(0), 2))

    def configure_optimizers(self):
        return torch.optim.SGD(self.layer.parameters(), lr=0.1)


class Trainer:
    def __init__(self, gradient_clip_val=0.5):
        self.gradient_clip_val = gradient_clip_val
        self.precision_plugin = NativeMixedPrecisionPlugin()
        self.logged_grad_norms, self.step_grad_norms = [], []

    def track_and_clip_gradients(self, model):
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), self.gradient_clip_val)
        self.logged_grad_norms.append(norm.item())

    def fit(self, model, batches):
        optimizer = model.configure_optimizers()
        for batch in batches:
            loss = model.training_step(batch)
            self.precision_plugin.backward(loss)
            self.precision_plugin.pre_optimizer_step(optimizer)
            self.track_and_clip_gradients(model)
            self.step_grad_norms.append(torch.norm(torch.stack([p.grad.norm() for p in model.parameters()])).item())
            self.precision_plugin.optimizer_step(optimizer)
            optimizer.zero_grad()


trainer = Trainer()
trainer.fit(BoringModel(), [torch.randn(8, 32) for _ in range(3)])
print("logged grad norms:", [f"{n:.1f}" for n in trainer.logged_grad_norms])
print("grad norms the optimizer stepped with:", [f"{n:.2e}" for n in trainer.step_grad_norms])
assert 1e-2 < max(trainer.step_grad_norms) <= 0.5 + 1e-4 and max(trainer.logged_grad_norms) < 100
