# Source: https://github.com/Harry24k/adversarial-attacks-pytorch/issues/2
# Category: requires-grad-non-leaf
# Expect: ok
"""The DeepFool attack of an adversarial-attack library sets `image.requires_grad = True` at the top of every
iteration, but the previous iteration rebuilt `image` from itself plus the perturbation without detaching it,
so the second iteration failed; the maintainer fixed it by adding `.detach()`."""
import torch
import torch.nn as nn

torch.manual_seed(0)
device = torch.device("cpu")


class Attack(object):
    def __init__(self, name, model):
        self.attack = name
        self.model = model
        self.device = next(model.parameters()).device

    def __call__(self, *args, **kwargs):
        self.model.eval()
        return self.forward(*args, **kwargs)


class DeepFool(Attack):
    def __init__(self, model, steps=3, overshoot=0.02):
        super(DeepFool, self).__init__("DeepFool", model)
        self.steps = steps
        self.overshoot = overshoot

    def forward(self, images, labels):
        images = images.clone().detach().to(self.device)
        labels = labels.clone().detach().to(self.device)
        adv_images = []
        for idx in range(len(images)):
            image = images[idx:idx + 1].clone().detach()
            label = labels[idx]
            for step in range(self.steps):
                image.requires_grad = True
                fs = self.model(image)[0]
                _, pre = torch.max(fs, dim=0)
                if pre != label:
                    break
                ws = self._construct_jacobian(fs, image)
                f_prime = fs - fs[label]
                w_prime = ws - ws[label]
                value = torch.abs(f_prime.detach()) / torch.norm(w_prime.flatten(1), p=2, dim=1)
                value[label] = float('inf')
                hat_L = torch.argmin(value)
                delta = torch.abs(f_prime[hat_L].detach()) * w_prime[hat_L] / (torch.norm(w_prime[hat_L], p=2) ** 2)
                image = torch.clamp(image + (1 + self.overshoot) * delta, min=0, max=1).detach()
            adv_images.append(image.detach())
        return torch.cat(adv_images)

    def _construct_jacobian(self, y, x):
        x_grads = []
        for idx, y_element in enumerate(y):
            if x.grad is not None:
                x.grad.zero_()
            y_element.backward(retain_graph=True)
            x_grads.append(x.grad.clone().detach())
        return torch.stack(x_grads).reshape(*y.shape, *x.shape)


model = nn.Sequential(nn.Flatten(), nn.Linear(3 * 4 * 4, 16), nn.Tanh(), nn.Linear(16, 3)).to(device)
images = torch.rand(2, 3, 4, 4)
with torch.no_grad():
    labels = model(images).argmax(1)
attack = DeepFool(model, steps=3)
adv_images = attack(images, labels)
with torch.no_grad():
    adv_pred = model(adv_images).argmax(1)
assert adv_images.shape == images.shape and not adv_images.requires_grad
assert not torch.equal(adv_images, images)
print("OK: DeepFool produced perturbed images; labels", labels.tolist(), "->", adv_pred.tolist())
