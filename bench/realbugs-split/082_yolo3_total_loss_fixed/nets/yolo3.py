"""The YOLOv3 body (a tiny backbone and three heads)."""
import torch.nn as nn


class YoloBody(nn.Module):
    def __init__(self, num_classes):
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1), nn.LeakyReLU(0.1), nn.Conv2d(8, 16, 3, 2, 1), nn.LeakyReLU(0.1))
        self.last_layer0 = nn.Conv2d(16, 3 * (5 + num_classes), 1)
        self.last_layer1 = nn.Conv2d(16, 3 * (5 + num_classes), 1)
        self.last_layer2 = nn.Conv2d(16, 3 * (5 + num_classes), 1)

    def forward(self, x):
        feat = self.backbone(x)
        return self.last_layer0(feat), self.last_layer1(feat), self.last_layer2(feat)
