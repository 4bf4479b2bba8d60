"""The encoder, binarizer and decoder cells."""
import torch
import torch.nn as nn
import torch.nn.functional as F

from functions import Sign


class EncoderCell(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 16, kernel_size=3, stride=2, padding=1, bias=False)
        self.conv2 = nn.Conv2d(16, 32, kernel_size=3, stride=2, padding=1, bias=False)

    def forward(self, input):
        x = F.relu(self.conv(input))
        return F.relu(self.conv2(x))


class Binarizer(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(32, 8, kernel_size=1, bias=False)

    def forward(self, input):
        feat = self.conv(input)
        x = torch.tanh(feat)
        return Sign.apply(x, self.training)


class DecoderCell(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(8, 48, kernel_size=1, bias=False)
        self.conv2 = nn.Conv2d(3, 3, kernel_size=1, bias=False)

    def forward(self, input):
        x = self.conv1(input)
        x = F.pixel_shuffle(x, 4)
        return torch.tanh(self.conv2(x)) / 2
