# Source: https://github.com/datawhalechina/easy-rl/pull/117
# Category: target-not-detached
# Expect: ok
"""A Double DQN tutorial agent computes the expected Q value from the target network without `.detach()`;
the PR author pointed out the TD target should be a constant (semi-gradient), otherwise the loss also
differentiates through the target network."""
import math
import random
from collections import deque

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

torch.manual_seed(0)
random.seed(0)
np.random.seed(0)


class MLP(nn.Module):
    def __init__(self, n_states, n_actions, hidden_dim=32):
        super(MLP, self).__init__()
        self.fc1 = nn.Linear(n_states, hidden_dim)
        self.fc2 = nn.Linear(hidden_dim, hidden_dim)
        self.fc3 = nn.Linear(hidden_dim, n_actions)

    def forward(self, x):
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


class ReplayBuffer(object):
    def __init__(self, capacity):
        self.buffer = deque(maxlen=capacity)

    def push(self, transitions):
        self.buffer.append(transitions)

    def sample(self, batch_size):
        batch = random.sample(self.buffer, min(batch_size, len(self.buffer)))
        return zip(*batch)

    def __len__(self):
        return len(self.buffer)


class DoubleDQN(object):
    def __init__(self, cfg):
        self.n_actions = cfg['n_actions']
        self.device = torch.device(cfg['device'])
        self.gamma = cfg['gamma']
        self.sample_count = 0
        self.epsilon = 0.9
        self.batch_size = cfg['batch_size']
        self.target_update = cfg['target_update']
        self.policy_net = MLP(cfg['n_states'], cfg['n_actions']).to(self.device)
        self.target_net = MLP(cfg['n_states'], cfg['n_actions']).to(self.device)
        self.target_net.load_state_dict(self.policy_net.state_dict())
        self.optimizer = optim.Adam(self.policy_net.parameters(), lr=cfg['lr'])
        self.memory = ReplayBuffer(cfg['buffer_size'])

    def sample_action(self, state):
        self.sample_count += 1
        self.epsilon = 0.01 + 0.89 * math.exp(-1. * self.sample_count / 50)
        if random.random() > self.epsilon:
            with torch.no_grad():
                state = torch.tensor(state, device=self.device, dtype=torch.float32).unsqueeze(dim=0)
                return self.policy_net(state).max(1)[1].item()
        return random.randrange(self.n_actions)

    def update(self):
        if len(self.memory) < self.batch_size:
            return
        state_batch, action_batch, reward_batch, next_state_batch, done_batch = self.memory.sample(self.batch_size)
        state_batch = torch.tensor(np.array(state_batch), device=self.device, dtype=torch.float)
        action_batch = torch.tensor(action_batch, device=self.device).unsqueeze(1)
        reward_batch = torch.tensor(reward_batch, device=self.device, dtype=torch.float).unsqueeze(1)
        next_state_batch = torch.tensor(np.array(next_state_batch), device=self.device, dtype=torch.float)
        done_batch = torch.tensor(np.float32(done_batch), device=self.device).unsqueeze(1)
        q_value_batch = self.policy_net(state_batch).gather(dim=1, index=action_batch)
        next_q_value_batch = self.policy_net(next_state_batch)
        next_target_value_batch = self.target_net(next_state_batch)
        # Double DQN: the policy net picks the action, the target net evaluates it
        next_target_q_value_batch = next_target_value_batch.gather(1, torch.max(next_q_value_batch, 1)[1].unsqueeze(1)).detach()
        expected_q_value_batch = reward_batch + self.gamma * next_target_q_value_batch * (1 - done_batch)
        loss = nn.MSELoss()(q_value_batch, expected_q_value_batch)
        self.optimizer.zero_grad()
        loss.backward()
        for param in self.policy_net.parameters():
            param.grad.data.clamp_(-1, 1)
        self.optimizer.step()
        self.last_target = expected_q_value_batch
        if self.sample_count % self.target_update == 0:
            self.target_net.load_state_dict(self.policy_net.state_dict())


class ToyEnv(object):
    """A 4-d random walk: action 1 pushes the state towards the origin and is rewarded."""

    def reset(self):
        self.state = np.random.randn(4).astype(np.float32)
        self.t = 0
        return self.state

    def step(self, action):
        self.t += 1
        self.state = (self.state * (0.8 if action == 1 else 1.1) + 0.1 * np.random.randn(4)).astype(np.float32)
        reward = 1.0 if action == 1 else 0.0
        return self.state, reward, self.t >= 20, {}


cfg = {'n_states': 4, 'n_actions': 2, 'device': 'cpu', 'gamma': 0.95, 'batch_size': 16,
       'target_update': 40, 'lr': 1e-3, 'buffer_size': 1000}
env, agent = ToyEnv(), DoubleDQN(cfg)
grad_norms = []
for i_ep in range(4):
    state = env.reset()
    for _ in range(20):
        action = agent.sample_action(state)
        next_state, reward, done, _ = env.step(action)
        agent.memory.push((state, action, reward, next_state, done))
        state = next_state
        agent.update()
        if agent.target_net.fc1.weight.grad is not None:
            grad_norms.append(agent.target_net.fc1.weight.grad.norm().item())
        if done:
            break

assert agent.last_target.grad_fn is None and not agent.last_target.requires_grad
assert all(p.grad is None for p in agent.target_net.parameters()) and grad_norms == []
assert all(p.grad is not None for p in agent.policy_net.parameters())
print("OK: the TD target is a constant and only the policy net receives gradients")
