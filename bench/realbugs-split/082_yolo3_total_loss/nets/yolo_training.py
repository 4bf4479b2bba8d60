"""The YOLOv3 loss of one head."""
import torch
import torch.nn as nn


class YOLOLoss(nn.Module):
    def __init__(self, num_classes):
        super().__init__()
        self.num_classes = num_classes

    def forward(self, input, targets):
        bs = input.size(0)
        prediction = input.view(bs, 3, 5 + self.num_classes, -1)
        conf = torch.sigmoid(prediction[:, :, 4])
        obj_target = torch.zeros_like(conf)
        for b, ann in enumerate(targets):
            obj_target[b, :, : len(ann)] = 1.0
        loss_conf = nn.functional.binary_cross_entropy(conf, obj_target)
        loss_loc = (prediction[:, :, :4] ** 2).mean() * 0.01
        loss = loss_conf + loss_loc
        return loss, loss_conf.item(), loss_loc.item()
