# Source: https://github.com/WenjieDu/PyPOTS/issues/667
# Category: state-dict-alias
# Expect: ok
"""A time-series imputation toolkit keeps `self.best_model_dict = self.model.state_dict()` when the validation loss
improves and loads it after training; the reporter got different results with more epochs although the best epoch was the same."""
import copy

import numpy as np
import torch
import torch.nn as nn

torch.manual_seed(0)


class _SAITSLike(nn.Module):
    """Tiny masked-reconstruction imputer standing in for the real network."""

    def __init__(self, n_features, d_model):
        super().__init__()
        self.embedding = nn.Linear(n_features * 2, d_model)
        self.reduce_dim = nn.Linear(d_model, n_features)

    def forward(self, inputs):
        X, missing_mask = inputs["X"], inputs["missing_mask"]
        hidden = torch.relu(self.embedding(torch.cat([X * missing_mask, missing_mask], dim=-1)))
        reconstruction = self.reduce_dim(hidden)
        imputed_data = missing_mask * X + (1 - missing_mask) * reconstruction
        loss = (((reconstruction - X) ** 2) * missing_mask).sum() / missing_mask.sum()
        return {"imputed_data": imputed_data, "loss": loss}


class BaseNNModel:
    def __init__(self, model, epochs, patience, lr):
        self.model = model
        self.epochs = epochs
        self.original_patience = patience
        self.patience = patience
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=lr)
        self.best_loss = float("inf")
        self.best_epoch = -1
        self.best_model_dict = None

    def _assemble_input_for_training(self, data):
        X, missing_mask = data
        return {"X": X, "missing_mask": missing_mask}

    def _assemble_input_for_validating(self, data):
        return self._assemble_input_for_training(data)

    def _train_model(self, train_loader, val_loader):
        for epoch in range(self.epochs):
            self.model.train()
            epoch_train_loss_collector = []
            for idx, data in enumerate(train_loader):
                inputs = self._assemble_input_for_training(data)
                self.optimizer.zero_grad()
                results = self.model.forward(inputs)
                results["loss"].backward()
                self.optimizer.step()
                epoch_train_loss_collector.append(results["loss"].item())
            mean_train_loss = np.mean(epoch_train_loss_collector)

            self.model.eval()
            epoch_val_loss_collector = []
            with torch.no_grad():
                for idx, data in enumerate(val_loader):
                    inputs = self._assemble_input_for_validating(data)
                    results = self.model.forward(inputs)
                    epoch_val_loss_collector.append(results["loss"].item())
            mean_loss = np.mean(epoch_val_loss_collector)

            if mean_loss < self.best_loss:
                self.best_epoch = epoch
                self.best_loss = mean_loss
                self.best_model_dict = copy.deepcopy(self.model.state_dict())
                self.patience = self.original_patience
            else:
                self.patience -= 1
            if self.patience == 0:
                break
        self.last_epoch = epoch

    def fit(self, train_loader, val_loader):
        self._train_model(train_loader, val_loader)
        self.model.load_state_dict(self.best_model_dict)
        self.model.eval()

    def validation_loss(self, val_loader):
        with torch.no_grad():
            return np.mean([self.model.forward(self._assemble_input_for_validating(d))["loss"].item()
                            for d in val_loader])


def make_batches(n_batches, shift):
    batches = []
    for _ in range(n_batches):
        X = torch.randn(8, 12, 4) + shift
        missing_mask = (torch.rand(8, 12, 4) > 0.2).float()
        batches.append((X, missing_mask))
    return batches


train_loader = make_batches(4, shift=0.0)
val_loader = make_batches(2, shift=3.0)  # shifted validation set: the model over-fits after a few epochs

saits = BaseNNModel(_SAITSLike(n_features=4, d_model=16), epochs=60, patience=3, lr=0.05)
saits.fit(train_loader, val_loader)

restored = saits.validation_loss(val_loader)
assert saits.best_epoch < saits.last_epoch
assert abs(restored - saits.best_loss) < 1e-6
print("OK: the restored model is the best epoch's (%d), val loss %.4f" % (saits.best_epoch, restored))
