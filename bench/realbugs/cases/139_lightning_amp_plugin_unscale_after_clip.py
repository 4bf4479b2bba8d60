# Source: https://github.com/Lightning-AI/pytorch-lightning/pull/9606
# Category: clip-scaled-grads
# Expect: silent: the trainer tracks the grad norm and clips before the native-AMP plugin unscales, so the logged norm is the scaled one and the clip shrinks every update by the loss scale
"""A Lightning-style trainer with a native mixed-precision plugin: after the plugin's scaled backward, the loop
tracks the gradient norm and clips to gradient_clip_val, and only then runs the plugin's pre-optimizer-step hook,
which unscales the gradients; the fix PR moves the unscale before the norm tracking and the clipping."""
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
            self.track_and_clip_gradients(model)  # BUG: clip-scaled-grads
            self.precision_plugin.pre_optimizer_step(optimizer)
            self.step_grad_norms.append(torch.norm(torch.stack([p.grad.norm() for p in model.parameters()])).item())
            self.precision_plugin.optimizer_step(optimizer)
            optimizer.zero_grad()


trainer = Trainer()
trainer.fit(BoringModel(), [torch.randn(8, 32) for _ in range(3)])
print("logged grad norms:", [f"{n:.1f}" for n in trainer.logged_grad_norms])
print("grad norms the optimizer stepped with:", [f"{n:.2e}" for n in trainer.step_grad_norms])
assert max(trainer.step_grad_norms) < 1e-3 and min(trainer.logged_grad_norms) > 100
print("EVIDENCE: the logged norm is the scaled one and each step used a gradient norm of",
      f"{max(trainer.step_grad_norms):.1e}", "instead of gradient_clip_val")
