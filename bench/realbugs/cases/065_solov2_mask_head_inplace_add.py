# Source: https://github.com/easton-cau/SOTR/issues/19
# Category: inplace-on-saved
# Expect: raises RuntimeError: one of the variables needed for gradient computation has been modified by an inplace operation
"""SOTR's SOLOv2-style mask feature head sums the per-level branches with `feature_add_all_level += ...`; the first
branch ends in a ReLU whose output autograd saved, so training crashed on newer torch until `+=` became `a = a + b`."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
device = torch.device("cpu")


def conv_gn_relu(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.GroupNorm(2, cout), nn.ReLU(inplace=True))


class MaskFeatHead(nn.Module):
    def __init__(self, in_channels=8, out_channels=8, num_classes=4, start_level=0, end_level=3):
        super().__init__()
        self.start_level, self.end_level = start_level, end_level
        self.convs_all_levels = nn.ModuleList()
        for i in range(start_level, end_level + 1):
            convs_per_level = nn.Sequential()
            if i == 0:
                convs_per_level.add_module('conv0', conv_gn_relu(in_channels, out_channels))
                self.convs_all_levels.append(convs_per_level)
                continue
            for j in range(i):
                chn = (in_channels + 2 if i == 3 else in_channels) if j == 0 else out_channels
                convs_per_level.add_module('conv' + str(j), conv_gn_relu(chn, out_channels))
                convs_per_level.add_module('upsample' + str(j), nn.Upsample(scale_factor=2, mode='bilinear', align_corners=False))
            self.convs_all_levels.append(convs_per_level)
        self.conv_pred = nn.Sequential(nn.Conv2d(out_channels, num_classes, 1), nn.GroupNorm(2, num_classes), nn.ReLU(inplace=True))

    def forward(self, inputs):
        assert len(inputs) == (self.end_level - self.start_level + 1)
        feature_add_all_level = self.convs_all_levels[0](inputs[0])
        for i in range(1, len(inputs)):
            mask_feat = inputs[i]
            if i == 3:  # add coordinates to the coarsest level
                x_range = torch.linspace(-1, 1, mask_feat.shape[-1], device=mask_feat.device)
                y_range = torch.linspace(-1, 1, mask_feat.shape[-2], device=mask_feat.device)
                y, x = torch.meshgrid(y_range, x_range, indexing='ij')
                y = y.expand([mask_feat.shape[0], 1, -1, -1])
                x = x.expand([mask_feat.shape[0], 1, -1, -1])
                mask_feat = torch.cat([mask_feat, torch.cat([x, y], 1)], 1)
            feature_add_all_level += self.convs_all_levels[i](mask_feat)  # BUG: inplace-on-saved
        return self.conv_pred(feature_add_all_level)


head = MaskFeatHead().to(device)
optimizer = torch.optim.SGD(head.parameters(), lr=0.01)
feats = [torch.randn(2, 8, 32 // 2 ** i, 32 // 2 ** i, device=device) for i in range(4)]
target = torch.randn(2, 4, 32, 32, device=device)

optimizer.zero_grad()
mask_pred = head(feats)
loss = F.mse_loss(mask_pred, target)
loss.backward()
optimizer.step()
print("EVIDENCE: backward succeeded, which it should not have")
