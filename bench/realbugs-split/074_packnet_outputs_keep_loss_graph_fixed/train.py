# Source: https://github.com/TRI-ML/packnet-sfm/pull/51
# Category: graph-kept-alive
# Expect: ok
"""A self-supervised depth trainer appends each training_step output (holding the loss tensor) to a list that is
handed to training_epoch_end; the maintainers' memory-leak fix detaches the loss before appending it."""
import torch

import packnet_sfm.model_wrapper as mw
from packnet_sfm.trainer import HorovodTrainer

torch.manual_seed(0)

dataloader = [{'rgb': torch.rand(2, 3, 16, 16), 'rgb_context': torch.rand(2, 3, 16, 16)} for _ in range(6)]
trainer = HorovodTrainer(max_epochs=1)
trainer.fit(mw.ModelWrapper(), dataloader)

assert all(o['loss'].grad_fn is None and not o['loss'].requires_grad for o in trainer.last_outputs)
assert not trainer.epoch_result['avg_train-loss'].requires_grad
print("OK: stored step losses are detached; epoch average", round(trainer.epoch_result['avg_train-loss'].item(), 4))
