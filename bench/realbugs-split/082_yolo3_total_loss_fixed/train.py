# Source: https://github.com/bubbliiiing/yolo3-pytorch/issues/3
# Category: graph-kept-alive
# Expect: ok
"""A YOLOv3 training script sums `total_loss += loss` over the epoch for its progress bar; a user pointed out that since
PyTorch 0.4 this keeps each iteration's graph alive and can run the GPU out of memory, and that it should be `loss.item()`."""
import time

import numpy as np
import torch
import torch.optim as optim
from torch.autograd import Variable

from nets.yolo3 import YoloBody
from nets.yolo_training import YOLOLoss

torch.manual_seed(0)
rng = np.random.RandomState(0)


def get_lr(optimizer):
    for param_group in optimizer.param_groups:
        return param_group["lr"]


def fit_one_epoch(net, yolo_losses, epoch, epoch_size, epoch_size_val, gen, genval, Epoch, cuda):
    total_loss = 0
    val_loss = 0
    start_time = time.time()
    for iteration, batch in enumerate(gen):
        if iteration >= epoch_size:
            break
        images, targets = batch[0], batch[1]
        with torch.no_grad():
            images = Variable(torch.from_numpy(images).type(torch.FloatTensor))
            targets = [Variable(torch.from_numpy(ann).type(torch.FloatTensor)) for ann in targets]
        optimizer.zero_grad()
        outputs = net(images)
        losses = []
        for i in range(3):
            loss_item = yolo_losses[i](outputs[i], targets)
            losses.append(loss_item[0])
        loss = sum(losses)
        loss.backward()
        optimizer.step()

        total_loss += loss.item()
        waste_time = time.time() - start_time
        postfix = {"total_loss": float(total_loss) / (iteration + 1), "lr": get_lr(optimizer), "step/s": waste_time}
        start_time = time.time()

    for iteration, batch in enumerate(genval):
        if iteration >= epoch_size_val:
            break
        images_val, targets_val = batch[0], batch[1]
        with torch.no_grad():
            images_val = Variable(torch.from_numpy(images_val).type(torch.FloatTensor))
            targets_val = [Variable(torch.from_numpy(ann).type(torch.FloatTensor)) for ann in targets_val]
            optimizer.zero_grad()
            outputs = net(images_val)
            losses = []
            for i in range(3):
                loss_item = yolo_losses[i](outputs[i], targets_val)
                losses.append(loss_item[0])
            loss = sum(losses)
            val_loss += loss
    print("Epoch:" + str(epoch + 1) + "/" + str(Epoch), "Total Loss: %.4f || Val Loss: %.4f " % (
        float(total_loss) / (epoch_size + 1), float(val_loss) / (epoch_size_val + 1)))
    return total_loss, val_loss


def generator(n):
    for _ in range(n):
        images = rng.rand(2, 3, 32, 32).astype(np.float32)
        targets = [rng.rand(rng.randint(1, 4), 5).astype(np.float32) for _ in range(2)]
        yield images, targets


num_classes = 4
model = YoloBody(num_classes)
net = model.train()
yolo_losses = [YOLOLoss(num_classes) for _ in range(3)]
optimizer = optim.Adam(net.parameters(), lr=1e-3)
Epoch = 1
for epoch in range(Epoch):
    total_loss, val_loss = fit_one_epoch(net, yolo_losses, epoch, 6, 2, generator(6), generator(2), Epoch, False)

assert isinstance(total_loss, float)
assert val_loss.grad_fn is None  # the validation sum was built under no_grad
print("OK: total_loss is a plain float: %.4f" % total_loss)
