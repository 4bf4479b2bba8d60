"""The learnable synthetic images and their labels, created once at import."""
import torch

from utils import args, channel, im_size, num_classes

image_syn = torch.randn(size=(num_classes * args.dlipc, channel, im_size[0], im_size[1]), dtype=torch.float, requires_grad=True, device=args.dldevice) * 0.01  # BUG: non-leaf-parameter
label_syn = torch.arange(num_classes, device=args.dldevice).repeat_interleave(args.dlipc)
