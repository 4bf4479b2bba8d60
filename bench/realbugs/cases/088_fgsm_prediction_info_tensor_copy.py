# Source: https://github.com/anishmadan23/adversarial-attacks-pytorch/issues/1
# Category: tensor-copy-construct
# Expect: raises AttributeError: 'NoneType' object has no attribute 'data'
"""An adversarial-attacks repo runs FGSM through a helper `getPredictionInfo(model, img)` that feeds `torch.tensor(img)` to the
model; the copy is a new leaf cut off from the image, so after `loss.backward()` the image's .grad is None and the attack crashes."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
device = torch.device("cpu")


def get_model(device):
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(2), nn.Flatten(), nn.Linear(32, 10))
    return model.to(device)


def getPredictionInfo(model, img):
    output = model(torch.tensor(img))  # BUG: tensor-copy-construct
    _, pred = torch.max(output.data, 1)
    op_probs = F.softmax(output, dim=1)
    pred_prob = ((torch.max(op_probs.data, 1)[0][0]) * 100, 4)
    return output, pred, op_probs, pred_prob


class FGSM(object):
    def __init__(self, model, criterion, orig_img, orig_label, eps):
        self.model = model
        self.criterion = criterion
        self.orig_img = orig_img
        self.epsilon = eps
        self.orig_label = orig_label

    def attack(self):
        output, pred, op_probs, pred_prob = getPredictionInfo(self.model, self.orig_img)
        loss = self.criterion(output, self.orig_label)
        loss.backward()
        img_grad = torch.sign(self.orig_img.grad.data)
        adv_img = self.orig_img.data + self.epsilon * img_grad
        return adv_img, img_grad


model = get_model(device)
model.eval()

img_tsor = torch.rand(3, 16, 16)
img_tsor.unsqueeze_(0)
img_tsor = img_tsor.to(device)
img_tsor.requires_grad_(True)
label = torch.tensor([3], requires_grad=False).to(device)
criterion = nn.CrossEntropyLoss()

for epsilon in [0.01, 0.05]:
    model.zero_grad()
    fgsm = FGSM(model, criterion, img_tsor, label, epsilon)
    fg_adv_img, fg_perturbation = fgsm.attack()
    assert fg_perturbation.abs().sum() > 0
    print("epsilon", epsilon, "max perturbation %.3f" % (fg_adv_img - img_tsor).abs().max().item())
    img_tsor.grad = None
print("OK: FGSM perturbed the image using its gradient")
