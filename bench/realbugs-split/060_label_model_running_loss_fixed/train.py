# Source: https://github.com/BatsResearch/labelmodels/issues/4
# Category: graph-kept-alive
# Expect: ok
"""A weak-supervision label model's internal optimisation loop adds each batch loss tensor to running_loss
(for logging), keeping all graphs of the epoch alive; the reporter's GPU ran out of memory on a big training set."""
import torch

from labelmodels import NaiveBayes

torch.manual_seed(0)

votes = torch.randint(0, 3, (64, 5))
model = NaiveBayes(num_classes=2, num_lfs=5)
model.estimate_label_model(votes)

last = model.epoch_losses[-1]
assert isinstance(last, float)
assert all(isinstance(v, float) for v in model.epoch_losses)
print("OK: epoch losses are plain floats:", [round(v, 4) for v in model.epoch_losses])
