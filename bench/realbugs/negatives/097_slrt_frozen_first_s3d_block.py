# Source: https://github.com/FangyunWei/SLRT/issues/74
# Category: optimizer-misses-params
# Expect: ok
"""A sign-language recognition network's users found that the first block of its S3D visual backbone always has None gradients;
the maintainers answered that the block is frozen on purpose (to save memory) - the rest of the network trains normally."""
import torch
import torch.nn as nn

torch.manual_seed(0)


class SepConv3d(nn.Module):
    def __init__(self, in_planes, out_planes, kernel_size, stride=1, padding=0):
        super().__init__()
        self.conv_s = nn.Conv3d(in_planes, out_planes, (1, kernel_size, kernel_size), (1, stride, stride), (0, padding, padding), bias=False)
        self.bn_s = nn.BatchNorm3d(out_planes)
        self.conv_t = nn.Conv3d(out_planes, out_planes, (kernel_size, 1, 1), (stride, 1, 1), (padding, 0, 0), bias=False)
        self.bn_t = nn.BatchNorm3d(out_planes)
        self.relu = nn.ReLU()

    def forward(self, x):
        x = self.relu(self.bn_s(self.conv_s(x)))
        return self.relu(self.bn_t(self.conv_t(x)))


class S3D_backbone(nn.Module):
    def __init__(self, freeze_block=1):
        super().__init__()
        self.base = nn.Sequential(SepConv3d(3, 8, 3, stride=2, padding=1), SepConv3d(8, 16, 3, padding=1))
        self.freeze_block = freeze_block
        self.set_frozen_layers()

    def set_frozen_layers(self):
        for i in range(self.freeze_block):
            for name, param in self.base[i].named_parameters():
                param.requires_grad = False

    def forward(self, x):
        return self.base(x).mean(dim=(3, 4))


class RecognitionNetwork(nn.Module):
    def __init__(self, num_glosses=10):
        super().__init__()
        self.visual_backbone = S3D_backbone(freeze_block=1)
        self.gloss_classifier = nn.Linear(16, num_glosses)

    def forward(self, video):
        feats = self.visual_backbone(video).transpose(1, 2)
        return self.gloss_classifier(feats).log_softmax(-1)


model = RecognitionNetwork()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
frozen_before = model.visual_backbone.base[0].conv_s.weight.detach().clone()
trained_before = model.visual_backbone.base[1].conv_s.weight.detach().clone()

for step in range(3):
    video = torch.randn(2, 3, 8, 16, 16)
    target = torch.randint(0, 10, (2, 4))
    log_probs = model(video)
    loss = nn.functional.nll_loss(log_probs.reshape(-1, 10), target.reshape(-1))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()

for name, param in model.named_parameters():
    if name.startswith("visual_backbone.base.0."):
        assert param.grad is None
assert torch.equal(frozen_before, model.visual_backbone.base[0].conv_s.weight)
assert not torch.equal(trained_before, model.visual_backbone.base[1].conv_s.weight)
print("OK: base.0 is frozen by design (grad None, unchanged); base.1 and the classifier train")
