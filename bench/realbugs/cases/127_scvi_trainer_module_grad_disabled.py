# Source: https://github.com/scverse/scvi-tools/issues/214
# Category: grad-mode-leak
# Expect: raises RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn
"""A single-cell library's trainer module calls torch.set_grad_enabled(False) at import time (its own train() re-enables
grad locally), which silently turns off autograd for any other torch code the user runs after importing it."""
import sys

import torch
import torch.nn as nn

torch.manual_seed(0)

# ---- scvi/inference/trainer.py (module body, runs on import) ----------------------------------
torch.set_grad_enabled(False)  # BUG: grad-mode-leak


class Trainer:
    def __init__(self, model, gene_dataset, weight_decay=1e-6):
        self.model = model
        self.gene_dataset = gene_dataset
        self.weight_decay = weight_decay
        self.history = {"elbo": []}

    def loss(self, x):
        recon = self.model(x)
        return ((recon - x) ** 2).mean()

    def compute_metrics(self):
        with torch.set_grad_enabled(False):
            self.model.eval()
            self.history["elbo"].append(self.loss(self.gene_dataset).item())
            self.model.train()

    def train(self, n_epochs=3, lr=1e-3, eps=0.01, params=None):
        with torch.set_grad_enabled(True):
            self.model.train()
            if params is None:
                params = filter(lambda p: p.requires_grad, self.model.parameters())
            optimizer = self.optimizer = torch.optim.Adam(params, lr=lr, eps=eps)
            self.compute_metrics()
            for self.epoch in range(n_epochs):
                loss = self.loss(self.gene_dataset)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                self.compute_metrics()
            self.model.eval()


class UnsupervisedTrainer(Trainer):
    pass
# ---- end of library module --------------------------------------------------------------------


# user code: fit the library's VAE, then train an unrelated classifier on the latent space
gene_dataset = torch.rand(32, 20)
vae = nn.Sequential(nn.Linear(20, 4), nn.ReLU(), nn.Linear(4, 20))
trainer = UnsupervisedTrainer(vae, gene_dataset)
trainer.train(n_epochs=3)
print("vae elbo history", [round(v, 4) for v in trainer.history["elbo"]], file=sys.stderr)

latent = vae[0](gene_dataset).detach()
labels = (gene_dataset[:, 0] > 0.5).long()
classifier = nn.Linear(4, 2)
optimizer = torch.optim.SGD(classifier.parameters(), lr=0.1)
for epoch in range(5):
    logits = classifier(latent)
    loss = nn.functional.cross_entropy(logits, labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print("classifier loss", loss.item())
