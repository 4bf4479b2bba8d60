"""The combined loss and the direction metrics."""
import numpy as np
import torch.nn as nn


def my_loss(classifier, regression, points, mode):
    alpha = 0.5
    MSE = nn.MSELoss()
    MSEl = MSE(regression, points)
    cross_entropy = nn.CrossEntropyLoss()
    ce = cross_entropy(classifier, mode)
    loss = ce * alpha + MSEl * (1 - alpha)
    return loss, MSEl, ce


def direction_performance(pred_direc, points):
    pred = pred_direc.detach().cpu().numpy()
    gt = points.cpu().numpy()
    start = np.mean(np.linalg.norm(pred[:, :2] - gt[:, :2], axis=1))
    end = np.mean(np.linalg.norm(pred[:, 2:] - gt[:, 2:], axis=1))
    angle = np.mean(np.abs(np.arctan2(pred[:, 3] - pred[:, 1], pred[:, 2] - pred[:, 0])
                           - np.arctan2(gt[:, 3] - gt[:, 1], gt[:, 2] - gt[:, 0])))
    return angle, start, end
