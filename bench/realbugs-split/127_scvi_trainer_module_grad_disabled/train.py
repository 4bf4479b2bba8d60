# Source: https://github.com/scverse/scvi-tools/issues/214
# Category: grad-mode-leak
# Expect: raises RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn
"""A single-cell library's trainer module calls torch.set_grad_enabled(False) at import time (its own train() re-enables
grad locally), which silently turns off autograd for any other torch code the user runs after importing it."""
import sys

import torch
import torch.nn as nn

from scvi.inference import UnsupervisedTrainer

torch.manual_seed(0)

# user code: fit the library's VAE, then train an unrelated classifier on the latent space
gene_dataset = torch.rand(32, 20)
vae = nn.Sequential(nn.Linear(20, 4), nn.ReLU(), nn.Linear(4, 20))
trainer = UnsupervisedTrainer(vae, gene_dataset)
trainer.train(n_epochs=3)
print("vae elbo history", [round(v, 4) for v in trainer.history["elbo"]], file=sys.stderr)

latent = vae[0](gene_dataset).detach()
labels = (gene_dataset[:, 0] > 0.5).long()
classifier = nn.Linear(4, 2)
optimizer = torch.optim.SGD(classifier.parameters(), lr=0.1)
for epoch in range(5):
    logits = classifier(latent)
    loss = nn.functional.cross_entropy(logits, labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print("classifier loss", loss.item())
