# Source: https://github.com/isayev/ReLeaSE/issues/39
# Category: scalar-roundtrip
# Expect: raises AttributeError: 'float' object has no attribute 'backward'
"""A de-novo drug-design RL loop accumulates the policy-gradient loss `rl_loss -= log_probs[0, top_i] * discounted_reward`;
to dodge a CUDA-to-NumPy error the reporter turned the term into `.item()` and found the generator no longer learned:
the loss is now a plain Python number cut off from the generator's graph."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class GeneratorData(object):
    def __init__(self, tokens="<>CNO()=1"):
        self.all_characters = tokens
        self.n_characters = len(tokens)

    def char_tensor(self, string):
        return torch.tensor([self.all_characters.index(c) for c in string], dtype=torch.long)


class StackAugmentedRNN(nn.Module):
    def __init__(self, n_characters, hidden_size, lr=0.01):
        super().__init__()
        self.hidden_size = hidden_size
        self.has_cell = False
        self.has_stack = False
        self.encoder = nn.Embedding(n_characters, hidden_size)
        self.rnn = nn.GRUCell(hidden_size, hidden_size)
        self.decoder = nn.Linear(hidden_size, n_characters)
        self.optimizer = torch.optim.Adadelta(self.parameters(), lr=lr)

    def init_hidden(self):
        return torch.zeros(1, self.hidden_size)

    def forward(self, inp, hidden, stack):
        hidden = self.rnn(self.encoder(inp.view(1)), hidden)
        return self.decoder(hidden), hidden, stack

    def evaluate(self, data, prime_str="<", end_token=">", predict_len=12):
        hidden = self.init_hidden()
        new_sample = prime_str
        inp = data.char_tensor(prime_str)[-1]
        with torch.no_grad():
            for _ in range(predict_len):
                output, hidden, _ = self.forward(inp, hidden, None)
                top_i = torch.multinomial(F.softmax(output, dim=1).view(-1), 1)[0]
                predicted_char = data.all_characters[top_i]
                new_sample += predicted_char
                inp = top_i
                if predicted_char == end_token:
                    break
        if not new_sample.endswith(end_token):
            new_sample += end_token
        return new_sample


def get_reward(smiles, predictor):
    return predictor(smiles)


class Reinforcement(object):
    def __init__(self, generator, predictor, get_reward):
        super(Reinforcement, self).__init__()
        self.generator = generator
        self.predictor = predictor
        self.get_reward = get_reward

    def policy_gradient(self, data, n_batch=4, gamma=0.97, grad_clipping=None, **kwargs):
        rl_loss = 0
        self.generator.optimizer.zero_grad()
        total_reward = 0

        for _ in range(n_batch):
            reward = 0
            trajectory = "<>"
            while reward == 0:
                trajectory = self.generator.evaluate(data)
                reward = self.get_reward(trajectory[1:-1], self.predictor, **kwargs)

            trajectory_input = data.char_tensor(trajectory)
            discounted_reward = reward
            total_reward += reward

            hidden = self.generator.init_hidden()
            stack = None
            for p in range(len(trajectory) - 1):
                output, hidden, stack = self.generator(trajectory_input[p], hidden, stack)
                log_probs = F.log_softmax(output, dim=1)
                top_i = trajectory_input[p + 1]
                rl_loss -= (log_probs[0, top_i].item() * discounted_reward)  # BUG: scalar-roundtrip
                discounted_reward = discounted_reward * gamma

        rl_loss = rl_loss / n_batch
        total_reward = total_reward / n_batch
        rl_loss.backward()
        if grad_clipping is not None:
            torch.nn.utils.clip_grad_norm_(self.generator.parameters(), grad_clipping)
        self.generator.optimizer.step()
        return total_reward, rl_loss.item()


data = GeneratorData()
generator = StackAugmentedRNN(data.n_characters, hidden_size=16, lr=1.0)
predictor = lambda smiles: 1.0 + smiles.count("C")
RL = Reinforcement(generator, predictor, get_reward)

before = generator.decoder.weight.detach().clone()
for step in range(2):
    total_reward, loss = RL.policy_gradient(data, grad_clipping=5.0)
assert not torch.equal(before, generator.decoder.weight)
print("OK: generator updated, last mean reward %.2f, rl_loss %.3f" % (total_reward, loss))
