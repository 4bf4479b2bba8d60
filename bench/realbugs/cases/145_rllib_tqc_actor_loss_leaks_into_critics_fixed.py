# Source: https://github.com/ray-project/ray/pull/65125
# Category: cross-loss-grad-leak
# Expect: ok
"""The TQC learner with the fix PR: the actor-loss pass through the online critics runs with the critic parameters
frozen (straight-through: the policy gradient flows through the sampled actions, not into the critic weights), so
the critic optimizer applies only the critic loss's gradient."""
import torch
import torch.nn as nn

torch.manual_seed(0)


class TQCModule(nn.Module):
    def __init__(self, obs_dim=4, act_dim=2, n_quantiles=5):
        super().__init__()
        self.pi = nn.Sequential(nn.Linear(obs_dim, 32), nn.ReLU(), nn.Linear(32, 2 * act_dim))
        self.qf = nn.Sequential(nn.Linear(obs_dim + act_dim, 32), nn.ReLU(), nn.Linear(32, n_quantiles))
        self.log_alpha = nn.Parameter(torch.zeros(()))

    def _forward_train(self, batch):
        mean, log_std = self.pi(batch["obs"]).chunk(2, -1)
        dist = torch.distributions.Normal(mean, log_std.clamp(-5, 2).exp())
        actions = dist.rsample()
        logp = dist.log_prob(actions).sum(-1)
        qf_preds = self.qf(torch.cat([batch["obs"], batch["actions"]], -1))
        self.qf.requires_grad_(False)
        qf_curr = self.qf(torch.cat([batch["obs"], actions], -1))
        self.qf.requires_grad_(True)
        return {"logp": logp, "qf_preds": qf_preds, "qf_curr": qf_curr}


class TQCTorchLearner:
    def __init__(self, module, lr=3e-4):
        self.module = module
        self.params = {"qf": list(module.qf.parameters()), "policy": list(module.pi.parameters()),
                       "alpha": [module.log_alpha]}
        self.optimizers = {k: torch.optim.Adam(v, lr=lr) for k, v in self.params.items()}

    def compute_losses(self, batch, fwd_out):
        alpha = self.module.log_alpha.exp()
        target = batch["rewards"][:, None].expand_as(fwd_out["qf_preds"])
        critic_loss = ((fwd_out["qf_preds"] - target) ** 2).mean()
        actor_loss = (alpha.detach() * fwd_out["logp"] - fwd_out["qf_curr"].mean(-1)).mean()
        alpha_loss = -(self.module.log_alpha * (fwd_out["logp"].detach() - 2.0)).mean()
        return {"qf": critic_loss, "policy": actor_loss, "alpha": alpha_loss}

    def compute_gradients(self, losses):
        grads = {}
        for name in ("qf", "policy", "alpha"):
            self.optimizers[name].zero_grad()
            losses[name].backward(retain_graph=True)
            grads[name] = {p: p.grad for p in self.params[name]}
        return grads

    def apply_gradients(self, grads):
        for name, opt in self.optimizers.items():
            opt.step()


module = TQCModule()
learner = TQCTorchLearner(module)
batch = {"obs": torch.randn(16, 4), "actions": torch.randn(16, 2), "rewards": torch.randn(16)}
torch.manual_seed(1)
losses = learner.compute_losses(batch, module._forward_train(batch))
grads = learner.compute_gradients(losses)
applied = grads["qf"][module.qf[2].weight].clone()

torch.manual_seed(1)
fwd = module._forward_train(batch)
module.qf.zero_grad()
learner.compute_losses(batch, fwd)["qf"].backward()
critic_only = module.qf[2].weight.grad.clone()
learner.apply_gradients(grads)
print("critic grad applied:", applied.norm().item(), " critic-loss gradient:", critic_only.norm().item())
assert torch.allclose(applied, critic_only, atol=1e-6)
assert all(p.grad is not None for p in module.pi.parameters())
