# Source: https://github.com/longcw/RoIAlign.pytorch/issues/41
# Category: legacy-autograd-function
# Expect: ok
"""The RoIAlign crop-and-resize as a new-style autograd Function: static forward/backward, the crop size passed to
forward and kept on ctx, called through CropAndResizeFunction.apply."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd import Function

torch.manual_seed(0)


def crop_and_resize_forward(image, boxes, box_ind, crop_height, crop_width):
    crops = []
    for box, b in zip(boxes.tolist(), box_ind.tolist()):
        x1, y1, x2, y2 = [int(round(v)) for v in box]
        patch = image[b:b + 1, :, y1:y2 + 1, x1:x2 + 1]
        crops.append(F.interpolate(patch, size=(crop_height, crop_width), mode="bilinear", align_corners=True))
    return torch.cat(crops)


class CropAndResizeFunction(Function):

    @staticmethod
    def forward(ctx, image, boxes, box_ind, crop_height, crop_width, extrapolation_value=0):
        ctx.save_for_backward(image, boxes, box_ind)
        ctx.crop_height, ctx.crop_width = crop_height, crop_width
        with torch.no_grad():
            return crop_and_resize_forward(image, boxes, box_ind, crop_height, crop_width)

    @staticmethod
    def backward(ctx, grad_outputs):
        image, boxes, box_ind = ctx.saved_tensors
        with torch.enable_grad():
            img = image.detach().requires_grad_()
            crops = crop_and_resize_forward(img, boxes, box_ind, ctx.crop_height, ctx.crop_width)
            grad_image, = torch.autograd.grad(crops, img, grad_outputs.contiguous())
        return grad_image, None, None, None, None, None


class CropAndResize(nn.Module):
    def __init__(self, crop_height, crop_width, extrapolation_value=0):
        super(CropAndResize, self).__init__()
        self.crop_height = crop_height
        self.crop_width = crop_width
        self.extrapolation_value = extrapolation_value

    def forward(self, image, boxes, box_ind):
        return CropAndResizeFunction.apply(image, boxes, box_ind, self.crop_height, self.crop_width,
                                           self.extrapolation_value)


class RoIHead(nn.Module):
    def __init__(self, num_classes=3):
        super().__init__()
        self.backbone = nn.Conv2d(3, 8, 3, padding=1)
        self.roi_align = CropAndResize(4, 4)
        self.cls = nn.Linear(8 * 4 * 4, num_classes)

    def forward(self, images, boxes, box_ind):
        rois = self.roi_align(F.relu(self.backbone(images)), boxes, box_ind)
        return self.cls(rois.flatten(1))


model = RoIHead()
images = torch.randn(2, 3, 16, 16)
boxes = torch.tensor([[1.0, 1.0, 8.0, 9.0], [4.0, 2.0, 14.0, 12.0], [0.0, 0.0, 15.0, 15.0]])
box_ind = torch.tensor([0, 0, 1], dtype=torch.int32)
labels = torch.tensor([0, 2, 1])
loss = F.cross_entropy(model(images, boxes, box_ind), labels)
loss.backward()
print("roi classification loss", loss.item())
assert model.backbone.weight.grad is not None and model.backbone.weight.grad.abs().sum() > 0
