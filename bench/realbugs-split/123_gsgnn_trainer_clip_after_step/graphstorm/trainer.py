"""The node-prediction trainer."""
import torch as th


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
