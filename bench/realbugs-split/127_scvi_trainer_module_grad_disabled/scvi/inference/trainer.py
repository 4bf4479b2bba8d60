"""The trainers of the library's models."""
import torch

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
