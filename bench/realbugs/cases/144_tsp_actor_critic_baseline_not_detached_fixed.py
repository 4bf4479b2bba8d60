# Source: https://github.com/astariul/encode-attend-navigate-pytorch/pull/3
# Category: target-not-detached
# Expect: ok
"""The TSP actor-critic trainer with the fix PR: the advantage (reward - critique) is detached in the REINFORCE
loss, so the critic only learns from its MSE loss."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class Agent(nn.Module):
    def __init__(self, dim=2, hidden=16):
        super().__init__()
        self.encoder = nn.Linear(dim, hidden)
        self.pointer = nn.Linear(hidden, hidden)
        self.critic = nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1))

    def forward(self, cities):
        enc = torch.tanh(self.encoder(cities))
        scores = torch.einsum("bnh,bmh->bnm", self.pointer(enc), enc)
        dist = torch.distributions.Categorical(logits=scores[:, 0])
        order = torch.stack([dist.sample() for _ in range(cities.size(1))], 1)
        log_probs = dist.log_prob(order.T).T.sum(1)
        critique = self.critic(enc.mean(1)).squeeze(-1)
        return order, critique, log_probs


def reward_fn(cities, tour):
    ordered = torch.gather(cities, 1, tour[..., None].expand(-1, -1, cities.size(-1)))
    return (ordered[:, 1:] - ordered[:, :-1]).norm(dim=-1).sum(1)


class Trainer:
    def __init__(self, agent, lr=1e-3, grad_clip=1.0):
        self.agent = agent
        self.optim = torch.optim.Adam(agent.parameters(), lr=lr)
        self.grad_clip = grad_clip

    def train_step(self, data):
        self.optim.zero_grad()
        tour, critique, log_probs = self.agent(data)
        reward = reward_fn(data, tour)
        loss1 = ((reward - critique).detach() * log_probs).mean()
        loss2 = F.mse_loss(reward, critique)
        (loss1 + loss2).backward()
        critic_grad = self.agent.critic[2].weight.grad.clone()
        nn.utils.clip_grad_norm_(self.agent.parameters(), self.grad_clip)
        self.optim.step()
        return critic_grad, loss2, critique


agent = Agent()
trainer = Trainer(agent)
data = torch.rand(4, 6, 2)
torch.manual_seed(1)
critic_grad, loss2, critique = trainer.train_step(data)

# the critic's gradient from its own MSE loss alone, at the same weights and samples
torch.manual_seed(0)
probe = Agent()
torch.manual_seed(1)
tour, crit, _ = probe(data)
F.mse_loss(reward_fn(data, tour), crit).backward()
print("critic grad in training:", critic_grad.norm().item(), " from the MSE loss only:", probe.critic[2].weight.grad.norm().item())
assert torch.allclose(critic_grad, probe.critic[2].weight.grad, atol=1e-6)
