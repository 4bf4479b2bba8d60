# Source: https://github.com/samuelyu2002/ImVisible/issues/2
# Category: graph-kept-alive
# Expect: silent: the per-epoch loss histories hold loss tensors with autograd history, so every batch's graph of every epoch stays referenced
"""A pedestrian-traffic-light network (class + direction regression) sums `running_loss += loss` (and the MSE and
cross-entropy parts) every batch and appends the averages to lists for plotting; the reporter's RAM filled up, fixed with `.item()`."""
import torch

from helpers import direction_performance, my_loss
from LYTNet import LYTNet

torch.manual_seed(0)

BATCH_SIZE = 8
MAX_EPOCHS = 3
INIT_LR = 0.001
LR_DROP_MILESTONES = [2]

train_dataloader = [{"image": torch.rand(BATCH_SIZE, 3, 32, 32), "mode": torch.randint(0, 5, (BATCH_SIZE,)),
                     "points": torch.rand(BATCH_SIZE, 4)} for _ in range(4)]

net = LYTNet()
loss_fn = my_loss
optimizer = torch.optim.Adam(net.parameters(), lr=INIT_LR, weight_decay=0.000005)
lr_scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, LR_DROP_MILESTONES)

train_losses = []
train_MSE = []
train_CE = []
train_accuracies = []

for epoch in range(MAX_EPOCHS):
    net.train()
    running_loss = 0.0
    running_loss_MSE = 0.0
    running_loss_cross_entropy = 0.0
    angle_error = 0.0
    startpoint_error = 0.0
    endpoint_error = 0.0
    train_correct = 0
    train_total = 0

    for j, data in enumerate(train_dataloader, 0):
        optimizer.zero_grad()
        train_total += 1
        images = data["image"].type(torch.FloatTensor)
        mode = data["mode"]
        points = data["points"]

        pred_classes, pred_direc = net(images)
        _, predicted = torch.max(pred_classes, 1)
        train_correct += (predicted == mode).sum().item()
        loss, MSE, cross_entropy = loss_fn(pred_classes, pred_direc, points, mode)
        angle, start, end = direction_performance(pred_direc, points)
        angle_error += angle
        endpoint_error += end
        startpoint_error += start

        loss.backward()
        optimizer.step()

        running_loss += loss  # BUG: graph-kept-alive
        running_loss_MSE += MSE  # BUG: graph-kept-alive
        running_loss_cross_entropy += cross_entropy  # BUG: graph-kept-alive

    train_MSE.append(running_loss_MSE / train_total)
    train_CE.append(running_loss_cross_entropy / train_total)
    train_losses.append(running_loss / train_total)
    train_accuracies.append(train_correct / train_total / BATCH_SIZE * 100)
    lr_scheduler.step()

kept = [t for t in train_losses + train_MSE + train_CE if isinstance(t, torch.Tensor) and t.grad_fn is not None]
assert len(kept) == 3 * MAX_EPOCHS
print("EVIDENCE:", len(kept), "logged epoch losses still carry grad_fn (e.g.", type(train_losses[0].grad_fn).__name__,
      ") - every batch graph of every epoch is kept for plotting")
