# Source: https://github.com/pnnl/neuromancer/pull/292
# Category: graph-kept-alive
# Expect: silent: the Trainer stores each epoch's output dict (the losses, still attached to their graphs) in its history and best-model record, so every epoch's autograd graph stays alive for the whole run
"""neuromancer's Trainer keeps the problem's output dictionary for logging and for the best-epoch record; the loss
entries in it were never detached, so the history held hundreds of MB of autograd graphs per long run. The fix
detaches the metrics before storing them."""
import torch
import torch.nn as nn

torch.manual_seed(0)


class Problem(nn.Module):
    def __init__(self):
        super().__init__()
        self.policy = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 4))

    def forward(self, batch):
        x_next = batch["x"] + 0.1 * self.policy(batch["x"])
        ref_loss = ((x_next - batch["r"]) ** 2).mean()
        reg_loss = 1e-3 * (x_next ** 2).mean()
        return {"train_loss": ref_loss + reg_loss, "train_ref_loss": ref_loss, "train_reg_loss": reg_loss}


class Trainer:
    def __init__(self, problem, train_data, optimizer, epochs=5):
        self.model, self.train_data, self.optimizer, self.epochs = problem, train_data, optimizer, epochs
        self.history = []
        self.best_output = None

    def train(self):
        best_loss = float("inf")
        for epoch in range(self.epochs):
            for batch in self.train_data:
                output = self.model(batch)
                self.optimizer.zero_grad()
                output["train_loss"].backward()
                self.optimizer.step()
            self.history.append(output)  # BUG: graph-kept-alive
            if output["train_loss"].item() < best_loss:
                best_loss = output["train_loss"].item()
                self.best_output = output
        return self.best_output


problem = Problem()
data = [{"x": torch.randn(16, 4), "r": torch.zeros(16, 4)} for _ in range(3)]
trainer = Trainer(problem, data, torch.optim.Adam(problem.parameters(), lr=1e-3))
trainer.train()
attached = [k for out in trainer.history for k, v in out.items() if v.grad_fn is not None]
print("metrics still attached to a graph:", len(attached))
assert len(attached) == 3 * trainer.epochs
print("EVIDENCE: the Trainer's history keeps", len(attached), "loss tensors with their graphs alive")
