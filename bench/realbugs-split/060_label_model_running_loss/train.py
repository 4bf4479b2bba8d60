# Source: https://github.com/BatsResearch/labelmodels/issues/4
# Category: graph-kept-alive
# Expect: silent: running_loss sums the loss tensors themselves, so every batch's graph stays referenced until the epoch ends
"""A weak-supervision label model's internal optimisation loop adds each batch loss tensor to running_loss
(for logging), keeping all graphs of the epoch alive; the reporter's GPU ran out of memory on a big training set."""
import torch

from labelmodels import NaiveBayes

torch.manual_seed(0)

votes = torch.randint(0, 3, (64, 5))
model = NaiveBayes(num_classes=2, num_lfs=5)
model.estimate_label_model(votes)

last = model.epoch_losses[-1]
assert isinstance(last, torch.Tensor) and last.grad_fn is not None
print("EVIDENCE: the epoch loss kept for logging still has grad_fn", type(last.grad_fn).__name__,
      "so the graphs of all", len(votes) // 16, "batches of the epoch stay in memory")
