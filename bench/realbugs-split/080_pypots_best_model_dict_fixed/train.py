# Source: https://github.com/WenjieDu/PyPOTS/issues/667
# Category: state-dict-alias
# Expect: ok
"""A time-series imputation toolkit keeps `self.best_model_dict = self.model.state_dict()` when the validation loss
improves and loads it after training; the reporter got different results with more epochs although the best epoch was the same."""
import torch

from pypots import BaseNNModel
from pypots.saits import _SAITSLike

torch.manual_seed(0)


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
