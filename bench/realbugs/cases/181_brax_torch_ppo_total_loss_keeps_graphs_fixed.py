# Source: https://github.com/google/brax/pull/152
# Category: graph-kept-alive
# Expect: ok
"""The Brax PyTorch PPO loop with the minibatch loss accumulated as a Python number, so each minibatch's graph is
freed after its backward."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class Agent(nn.Module):
    def __init__(self, obs_size=8, act_size=2):
        super().__init__()
        self.policy = nn.Sequential(nn.Linear(obs_size, 32), nn.Tanh(), nn.Linear(32, 2 * act_size))
        self.value = nn.Sequential(nn.Linear(obs_size, 32), nn.Tanh(), nn.Linear(32, 1))

    def loss(self, td):
        loc, scale = self.policy(td["observation"]).chunk(2, -1)
        dist = torch.distributions.Normal(loc, F.softplus(scale) + 1e-3)
        logp = dist.log_prob(td["action"]).sum(-1)
        ratio = torch.exp(logp - td["old_logp"])
        adv = td["advantage"]
        policy_loss = -torch.min(ratio * adv, ratio.clamp(0.7, 1.3) * adv).mean()
        v_loss = F.mse_loss(self.value(td["observation"]).squeeze(-1), td["return"])
        return policy_loss + 0.5 * v_loss - 1e-3 * dist.entropy().mean()


agent = Agent()
optimizer = torch.optim.Adam(agent.parameters(), lr=3e-4)
total_loss = 0
total_steps = 0
for update in range(4):
    td = {"observation": torch.randn(64, 8), "action": torch.randn(64, 2), "old_logp": torch.randn(64),
          "advantage": torch.randn(64), "return": torch.randn(64)}
    for mb in range(4):
        sl = slice(mb * 16, (mb + 1) * 16)
        loss = agent.loss({k: v[sl] for k, v in td.items()})
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total_loss += loss.item()
        total_steps += 1
print("mean loss", total_loss / total_steps)
assert isinstance(total_loss, float)
