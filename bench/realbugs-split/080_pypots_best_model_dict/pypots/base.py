"""The base class of the neural-network models: training with early stopping."""
import numpy as np
import torch


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
                self.best_model_dict = self.model.state_dict()  # BUG: state-dict-alias
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
