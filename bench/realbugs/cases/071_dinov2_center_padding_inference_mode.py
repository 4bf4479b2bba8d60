# Source: https://github.com/facebookresearch/dinov2/issues/472
# Category: inference-tensor
# Expect: raises RuntimeError: Inference tensors cannot be saved for backward
"""Training a depth head on the official DINOv2 depther failed in the forward pass: the backbone's forward
pre-hook pads the image with a CenterPadding module whose forward is decorated with @torch.inference_mode(),
so the padded image is an inference tensor that the patch embedding cannot save; removing the decorator fixed it."""
import itertools
import math
from functools import partial

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
device = torch.device("cpu")


class CenterPadding(nn.Module):
    def __init__(self, multiple):
        super().__init__()
        self.multiple = multiple

    def _get_pad(self, size):
        new_size = math.ceil(size / self.multiple) * self.multiple
        pad_size = new_size - size
        pad_size_left = pad_size // 2
        return pad_size_left, pad_size - pad_size_left

    @torch.inference_mode()  # BUG: inference-tensor
    def forward(self, x):
        pads = list(itertools.chain.from_iterable(self._get_pad(m) for m in x.shape[:1:-1]))
        return F.pad(x, pads)


class TinyViT(nn.Module):
    def __init__(self, patch_size=4, embed_dim=16, depth=4):
        super().__init__()
        self.patch_size, self.embed_dim = patch_size, embed_dim
        self.patch_embed = nn.Conv2d(3, embed_dim, patch_size, stride=patch_size)
        self.blocks = nn.ModuleList([nn.TransformerEncoderLayer(embed_dim, 2, 32, dropout=0.0, batch_first=True)
                                     for _ in range(depth)])

    def get_intermediate_layers(self, x, n, reshape=True, return_class_token=False, norm=False):
        B, _, H, W = x.shape
        x = self.patch_embed(x).flatten(2).transpose(1, 2)
        outputs = []
        for i, blk in enumerate(self.blocks):
            x = blk(x)
            if i in n:
                outputs.append(x)
        if reshape:
            outputs = [o.transpose(1, 2).reshape(B, -1, H // self.patch_size, W // self.patch_size) for o in outputs]
        return tuple(outputs)


class LinearDepthHead(nn.Module):
    def __init__(self, in_channels, min_depth=0.001, max_depth=10.0):
        super().__init__()
        self.min_depth, self.max_depth = min_depth, max_depth
        self.conv_depth = nn.Conv2d(in_channels, 1, 1)

    def forward_train(self, img, x, img_metas, depth_gt):
        feat = torch.cat(x, dim=1)
        depth = torch.sigmoid(self.conv_depth(feat)) * self.max_depth
        depth = F.interpolate(depth, size=depth_gt.shape[-2:], mode="bilinear", align_corners=False)
        return {"loss_depth": F.l1_loss(depth, depth_gt)}


class DepthEncoderDecoder(nn.Module):
    def __init__(self, backbone, decode_head):
        super().__init__()
        self.backbone = backbone
        self.decode_head = decode_head

    def extract_feat(self, img):
        return self.backbone(img)

    def forward(self, img, img_metas, return_loss=True, depth_gt=None):
        x = self.extract_feat(img)
        losses = self.decode_head.forward_train(img, x, img_metas, depth_gt)
        return {"decode." + k: v for k, v in losses.items()}


backbone = TinyViT()
out_index = [1, 3]
model = DepthEncoderDecoder(backbone=backbone, decode_head=LinearDepthHead(backbone.embed_dim * len(out_index)))
model.backbone.forward = partial(backbone.get_intermediate_layers, n=out_index, reshape=True, norm=False)
model.backbone.register_forward_pre_hook(lambda _, x: CenterPadding(backbone.patch_size)(x[0]))
model.to(device)

optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
model.train()
train_loader = [{"image": torch.rand(2, 3, 30, 30), "depth": torch.rand(2, 1, 30, 30) * 10} for _ in range(2)]
history = []
for epoch in range(2):
    for batch in train_loader:
        images = batch["image"].to(device)
        depths = batch["depth"].to(device)
        losses = model(images, img_metas=None, depth_gt=depths, return_loss=True)
        loss = losses["decode.loss_depth"]
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        history.append(loss.item())
print("EVIDENCE: training ran without error, which it should not have")
