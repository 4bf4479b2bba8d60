# Source: https://github.com/huggingface/torchMoji/issues/21
# Category: loss-rewrap
# Expect: silent: the model's forward returns outputs.data for tensor inputs, and the re-wrapped loss is a fresh leaf, so fine-tuning never changes a weight
"""Fine-tuning torchMoji raised "element 0 of tensors does not require grad"; the reporter wrapped the loss in
Variable(loss, requires_grad=True), which silenced the error but the val loss stayed identical epoch after epoch
(the real cause: forward() returned outputs.data when given a LongTensor)."""
import torch
import torch.nn as nn

from torchmoji.finetuning import fit_model
from torchmoji.model_def import TorchMoji

torch.manual_seed(0)
device = torch.device("cpu")

model = TorchMoji(nb_classes=2, nb_tokens=50).to(device)
X = torch.randint(1, 50, (32, 10))
y = (X[:, 0] > 25).long()
train_gen = [(X[i:i + 8], y[i:i + 8]) for i in range(0, 24, 8)]
val_gen = [(X[24:], y[24:])]
adam = torch.optim.Adam(model.parameters(), lr=0.01)
before = model.output_layer[0].weight.detach().clone()

history = fit_model(model, nn.BCEWithLogitsLoss(), adam, train_gen, val_gen, epochs=3)

assert torch.equal(before, model.output_layer[0].weight)
assert all(p.grad is None for p in model.parameters())
assert len(set(history)) == 1
print("EVIDENCE: after 3 epochs no parameter has a grad and the val loss is frozen at", round(float(history[0]), 5))
