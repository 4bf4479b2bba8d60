# Source: https://github.com/pytorch/rl/issues/1187
# Category: backward-twice
# Expect: ok
"""torchrl's TD3 loss after the fix: the actor loss and the critic loss come from two Q-network passes, so each
has its own graph and the two backward calls (one per optimizer) both succeed."""
import torch
import torch.nn as nn

torch.manual_seed(0)


class TD3Loss(nn.Module):
    def __init__(self, actor, qvalue, gamma=0.99):
        super().__init__()
        self.actor, self.qvalue, self.gamma = actor, qvalue, gamma

    def forward(self, td):
        obs, action = td["observation"], td["action"]
        actor_action = self.actor(obs)
        with torch.no_grad():
            next_q = self.qvalue(torch.cat([td["next_observation"], self.actor(td["next_observation"])], -1))
            target = td["reward"] + self.gamma * next_q.squeeze(-1)
        q_replay = self.qvalue(torch.cat([obs, action], -1)).squeeze(-1)
        q_actor = self.qvalue(torch.cat([obs, actor_action], -1)).squeeze(-1)
        return {"loss_actor": -q_actor.mean(), "loss_qvalue": ((q_replay - target) ** 2).mean()}


actor = nn.Sequential(nn.Linear(3, 16), nn.Tanh(), nn.Linear(16, 1), nn.Tanh())
qvalue = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 1))
loss_module = TD3Loss(actor, qvalue)
actor_optim = torch.optim.Adam(actor.parameters(), lr=1e-3)
critic_optim = torch.optim.Adam(qvalue.parameters(), lr=1e-3)
for step in range(2):
    td = {"observation": torch.randn(8, 3), "action": torch.rand(8, 1) * 2 - 1, "reward": torch.randn(8),
          "next_observation": torch.randn(8, 3)}
    loss = loss_module(td)
    actor_optim.zero_grad()
    loss["loss_actor"].backward()
    actor_optim.step()
    critic_optim.zero_grad()
    loss["loss_qvalue"].backward()
    critic_optim.step()
    assert all(p.grad is not None for p in qvalue.parameters())
print("both losses back-propagated on their own graphs")
