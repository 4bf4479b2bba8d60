"""The DeepFool attack."""
import torch

from .attack import Attack


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
