# Source: https://github.com/Harry24k/adversarial-attacks-pytorch/issues/2
# Category: requires-grad-non-leaf
# Expect: raises RuntimeError: you can only change requires_grad flags of leaf variables
"""The DeepFool attack of an adversarial-attack library sets `image.requires_grad = True` at the top of every
iteration, but the previous iteration rebuilt `image` from itself plus the perturbation without detaching it,
so the second iteration failed; the maintainer fixed it by adding `.detach()`."""
import torch
import torch.nn as nn

import torchattacks

torch.manual_seed(0)
device = torch.device("cpu")

model = nn.Sequential(nn.Flatten(), nn.Linear(3 * 4 * 4, 16), nn.Tanh(), nn.Linear(16, 3)).to(device)
images = torch.rand(2, 3, 4, 4)
with torch.no_grad():
    labels = model(images).argmax(1)
attack = torchattacks.DeepFool(model, steps=3)
adv_images = attack(images, labels)
print("EVIDENCE: the attack ran without error, which it should not have")
