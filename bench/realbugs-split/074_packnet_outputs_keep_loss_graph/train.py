# Source: https://github.com/TRI-ML/packnet-sfm/pull/51
# Category: graph-kept-alive
# Expect: silent: each step's output dict is appended with its undetached loss, so every batch's autograd graph stays referenced until training_epoch_end
"""A self-supervised depth trainer appends each training_step output (holding the loss tensor) to a list that is
handed to training_epoch_end; the maintainers' memory-leak fix detaches the loss before appending it."""
import torch

import packnet_sfm.model_wrapper as mw
from packnet_sfm.trainer import HorovodTrainer

torch.manual_seed(0)

dataloader = [{'rgb': torch.rand(2, 3, 16, 16), 'rgb_context': torch.rand(2, 3, 16, 16)} for _ in range(6)]
trainer = HorovodTrainer(max_epochs=1)
trainer.fit(mw.ModelWrapper(), dataloader)

kept = [o['loss'].grad_fn for o in trainer.last_outputs]
assert all(fn is not None for fn in kept)
assert trainer.epoch_result['avg_train-loss'].requires_grad
print("EVIDENCE: all", len(kept), "stored step outputs still hold their loss graphs (grad_fn", type(kept[0]).__name__,
      ") and the epoch average is itself part of a graph")
