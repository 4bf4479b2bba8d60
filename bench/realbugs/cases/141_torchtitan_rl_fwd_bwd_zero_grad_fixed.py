# Source: https://github.com/pytorch/torchtitan/pull/3575
# Category: zero-grad-in-accumulation
# Expect: ok
"""The RL trainer with the fix PR: forward_backward() only accumulates, optim_step() steps and then zeroes the
gradients, so the step applies the sum over all micro-batches."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class PolicyModel(nn.Module):
    def __init__(self, vocab=32, dim=16):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.out = nn.Linear(dim, vocab)

    def forward(self, tokens):
        return self.out(torch.tanh(self.embed(tokens)))


class RLTrainer:
    def __init__(self, model, lr=1e-2):
        self.model = model
        self.optimizers = torch.optim.SGD(model.parameters(), lr=lr)
        self.grad_at_step = None

    def forward_backward(self, micro_batch, num_micro_batches):
        tokens, targets, advantages = micro_batch
        logp = F.log_softmax(self.model(tokens), dim=-1).gather(-1, targets[..., None]).squeeze(-1)
        loss = -(advantages[:, None] * logp).mean() / num_micro_batches
        loss.backward()
        return loss.item()

    def optim_step(self):
        self.grad_at_step = self.model.out.weight.grad.clone()
        self.optimizers.step()
        self.optimizers.zero_grad()


def controller(trainer, micro_batches):
    for mb in micro_batches:
        trainer.forward_backward(mb, len(micro_batches))
    trainer.optim_step()


model = PolicyModel()
reference = PolicyModel()
reference.load_state_dict(model.state_dict())
micro_batches = [(torch.randint(0, 32, (4, 6)), torch.randint(0, 32, (4, 6)), torch.randn(4)) for _ in range(4)]
trainer = RLTrainer(model)
controller(trainer, micro_batches)

for tokens, targets, advantages in micro_batches:
    logp = F.log_softmax(reference(tokens), dim=-1).gather(-1, targets[..., None]).squeeze(-1)
    (-(advantages[:, None] * logp).mean() / 4).backward()
wanted = reference.out.weight.grad
print("applied", trainer.grad_at_step.norm().item(), "wanted", wanted.norm().item())
assert torch.allclose(trainer.grad_at_step, wanted, atol=1e-6)
