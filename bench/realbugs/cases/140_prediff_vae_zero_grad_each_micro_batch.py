# Source: https://github.com/gaozhihan/PreDiff/issues/32
# Source: https://github.com/gaozhihan/PreDiff/pull/33
# Category: zero-grad-in-accumulation
# Expect: silent: opt.zero_grad() runs before every micro-batch's backward, so the accumulated step only applies the last micro-batch's gradient
"""A VAE pretraining module with manual optimization accumulates gradients over accumulate_grad_batches batches,
but calls the optimizer's zero_grad() outside the `if` that steps, before each backward; every earlier micro-batch's
gradient is erased. The fix moves zero_grad() after step() inside the condition."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class AutoencoderKL(nn.Module):
    def __init__(self, in_dim=16, latent=4):
        super().__init__()
        self.encoder = nn.Linear(in_dim, 2 * latent)
        self.decoder = nn.Linear(latent, in_dim)

    def forward(self, x):
        mean, logvar = self.encoder(x).chunk(2, dim=-1)
        z = mean + torch.randn_like(mean) * (0.5 * logvar).exp()
        return self.decoder(z), mean, logvar


class VAEPLModule(nn.Module):
    def __init__(self, accumulate_grad_batches=4, lr=1e-3, kl_weight=1e-3):
        super().__init__()
        self.torch_nn_module = AutoencoderKL()
        self.accumulate_grad_batches = accumulate_grad_batches
        self.kl_weight = kl_weight
        self.opt_ae = torch.optim.SGD(self.torch_nn_module.parameters(), lr=lr)
        self.grads_at_step = []

    def training_step(self, batch, batch_idx):
        rec, mean, logvar = self.torch_nn_module(batch)
        kl = -0.5 * torch.mean(1 + logvar - mean.pow(2) - logvar.exp())
        loss_ae = F.l1_loss(rec, batch) + self.kl_weight * kl
        self.opt_ae.zero_grad()  # BUG: zero-grad-in-accumulation
        (loss_ae / self.accumulate_grad_batches).backward()
        if (batch_idx + 1) % self.accumulate_grad_batches == 0:
            self.grads_at_step.append(self.torch_nn_module.decoder.weight.grad.clone())
            self.opt_ae.step()
        return loss_ae


torch.manual_seed(1)
batches = [torch.randn(8, 16) for _ in range(4)]
module = VAEPLModule()
init = {k: v.clone() for k, v in module.state_dict().items()}
for batch_idx, batch in enumerate(batches):
    torch.manual_seed(100 + batch_idx)
    module.training_step(batch, batch_idx)

# the gradient a 4-batch accumulation should have applied
ref = AutoencoderKL()
ref.load_state_dict({k[len("torch_nn_module."):]: v for k, v in init.items()})
for batch_idx, batch in enumerate(batches):
    torch.manual_seed(100 + batch_idx)
    rec, mean, logvar = ref(batch)
    kl = -0.5 * torch.mean(1 + logvar - mean.pow(2) - logvar.exp())
    ((F.l1_loss(rec, batch) + 1e-3 * kl) / 4).backward()
applied, wanted = module.grads_at_step[0], ref.decoder.weight.grad
print("applied grad norm", applied.norm().item(), "accumulated grad norm", wanted.norm().item())
assert not torch.allclose(applied, wanted, atol=1e-6)
print("EVIDENCE: the step applied only the last micro-batch's gradient (norm",
      round(applied.norm().item(), 4), ") instead of the 4-batch sum (norm", round(wanted.norm().item(), 4), ")")
