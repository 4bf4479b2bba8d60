"""The DCGAN generator and discriminator, built by factory functions."""
import torch.nn as nn


def build_generator(nz, ngf):
    return nn.Sequential(
        nn.ConvTranspose2d(nz, ngf, 4, 1, 0, bias=False), nn.BatchNorm2d(ngf), nn.ReLU(True),
        nn.ConvTranspose2d(ngf, 1, 4, 2, 1, bias=False), nn.Tanh())


def build_discriminator(ndf):
    return nn.Sequential(
        nn.Conv2d(1, ndf, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, inplace=True),
        nn.Conv2d(ndf, 1, 4, 1, 0, bias=False), nn.Sigmoid())
