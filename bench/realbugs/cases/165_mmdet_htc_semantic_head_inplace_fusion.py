# Source: https://github.com/open-mmlab/mmdetection/pull/8083
# Category: inplace-on-saved
# Expect: raises RuntimeError: one of the variables needed for gradient computation has been modified by an inplace operation
"""HTC's FusedSemanticHead fuses the FPN levels by running each through a lateral ConvModule (conv + ReLU) and
adding them into the output of the fusion level with `x += self.lateral_convs[i](feat)`. x is the output of that
level's ReLU, which ReLU saved for its backward, so the in-place sum breaks backward; the PR writes
`x = x + self.lateral_convs[i](feat)`."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class ConvModule(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, padding=0):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=padding)
        self.activate = nn.ReLU(inplace=True)

    def forward(self, x):
        return self.activate(self.conv(x))


class FusedSemanticHead(nn.Module):
    def __init__(self, num_ins=3, fusion_level=1, in_channels=8, conv_out_channels=8, num_classes=5):
        super().__init__()
        self.num_ins = num_ins
        self.fusion_level = fusion_level
        self.lateral_convs = nn.ModuleList(ConvModule(in_channels, in_channels, 1) for _ in range(num_ins))
        self.convs = nn.ModuleList([ConvModule(in_channels, conv_out_channels, 3, padding=1)])
        self.conv_logits = nn.Conv2d(conv_out_channels, num_classes, 1)

    def forward(self, feats):
        x = self.lateral_convs[self.fusion_level](feats[self.fusion_level])
        fused_size = tuple(x.shape[-2:])
        for i, feat in enumerate(feats):
            if i != self.fusion_level:
                feat = F.interpolate(feat, size=fused_size, mode="bilinear", align_corners=True)
                x += self.lateral_convs[i](feat)  # BUG: inplace-on-saved
        for conv in self.convs:
            x = conv(x)
        return self.conv_logits(x), x

    def loss(self, mask_pred, labels):
        return F.cross_entropy(mask_pred, labels)


head = FusedSemanticHead()
feats = [torch.randn(2, 8, s, s) for s in (16, 8, 4)]
mask_pred, semantic_feat = head(feats)
labels = torch.randint(0, 5, (2, 8, 8))
loss_seg = head.loss(mask_pred, labels)
loss_seg.backward()
print("semantic head gradient norm:", head.conv_logits.weight.grad.norm().item())
