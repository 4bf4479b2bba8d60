# Source: https://github.com/awslabs/graphstorm/issues/1366
# Category: clip-after-step
# Expect: silent: clip_grad_norm_ runs after optimizer.step(), so every update uses the unclipped gradient and --max-grad-norm does nothing
"""A node-prediction trainer class zeroes, backprops and steps its optimizer and only then clips the gradients
with max_grad_norm; the clipped gradients are thrown away at the next zero_grad."""
import torch as th
import torch.nn as nn
import torch.nn.functional as F

th.manual_seed(0)


class GSgnnNodeModel(nn.Module):
    def __init__(self, in_dim, hid, n_classes):
        super().__init__()
        self.encoder = nn.Linear(in_dim, hid)
        self.decoder = nn.Linear(hid, n_classes)

    def forward(self, adj, node_feats, labels):
        h = F.relu(self.encoder(adj @ node_feats))
        logits = self.decoder(adj @ h)
        return F.cross_entropy(logits, labels)


class GSgnnNodePredictionTrainer:
    def __init__(self, model, lr):
        self._model = model
        self.optimizer = th.optim.SGD(model.parameters(), lr=lr)
        self.update_norms = []

    def fit(self, train_loader, num_epochs, max_grad_norm=None, grad_norm_type=2.0):
        model = self._model
        total_steps = 0
        for epoch in range(num_epochs):
            model.train()
            for i, (adj, node_feats, lbl) in enumerate(train_loader):
                total_steps += 1
                before = [p.detach().clone() for p in model.parameters()]
                loss = model(adj, node_feats, lbl)

                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()

                if max_grad_norm is not None:  # BUG: clip-after-step
                    th.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm, grad_norm_type)
                self.update_norms.append(th.sqrt(sum(((p.detach() - b) ** 2).sum()
                                                     for p, b in zip(model.parameters(), before))).item())


def make_loader(n_batches=4, n=12, in_dim=8, n_classes=3):
    batches = []
    for _ in range(n_batches):
        adj = (th.rand(n, n) < 0.3).float() + th.eye(n)
        adj = adj / adj.sum(1, keepdim=True)
        batches.append((adj, 50.0 * th.randn(n, in_dim), th.randint(0, n_classes, (n,))))
    return batches


lr, max_grad_norm = 0.01, 1.0
trainer = GSgnnNodePredictionTrainer(GSgnnNodeModel(8, 16, 3), lr=lr)
trainer.fit(make_loader(), num_epochs=2, max_grad_norm=max_grad_norm)
largest = max(trainer.update_norms)
print(f"largest parameter update {largest:.4f}; bound with clipping lr*max_grad_norm = {lr * max_grad_norm:.4f}")
assert largest > 5 * lr * max_grad_norm
print("EVIDENCE: a single SGD update moved the parameters by", round(largest, 4), "> lr*max_grad_norm =", lr * max_grad_norm)
