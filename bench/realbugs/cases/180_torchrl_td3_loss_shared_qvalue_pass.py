# Source: https://github.com/pytorch/rl/issues/1187
# Category: backward-twice
# Expect: raises RuntimeError: Trying to backward through the graph a second time
"""A user ports a DDPG script with separate actor and critic optimizers to torchrl's TD3 loss. The loss module
evaluates the Q-network once on the stacked (replay action, actor action) batch and slices both losses out of that
single pass, so loss_actor and loss_qvalue share the Q-network's graph; back-propagating the actor loss frees it
and the critic's backward fails. Reduced here with the shared pass written out; the fixed twin gives the actor loss
its own Q pass (torchrl later separated the two losses, pytorch/rl#1240)."""
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
        both = torch.cat([torch.cat([obs, action], -1), torch.cat([obs, actor_action], -1)], 0)
        q_all = self.qvalue(both).squeeze(-1)  # BUG: backward-twice
        q_replay, q_actor = q_all.chunk(2)
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
