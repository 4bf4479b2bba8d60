"""Base class of the label models and its optimisation loop."""
import logging

import torch
import torch.nn as nn


class LearningConfig(object):
    def __init__(self):
        self.epochs = 2
        self.step_size = 0.05
        self.momentum = 0.9


class LabelModel(nn.Module):
    """Parent class: subclasses implement forward() and the regulariser."""

    def forward(self, *args):
        raise NotImplementedError

    def _get_regularization_loss(self):
        return 0.0

    def _do_estimate_label_model(self, batches, config):
        optimizer = torch.optim.SGD(self.parameters(), lr=config.step_size,
                                    momentum=config.momentum, weight_decay=0)
        self.epoch_losses = []
        for epoch in range(config.epochs):
            self.train()
            running_loss = 0.0
            for i_batch, inputs in enumerate(batches):
                optimizer.zero_grad()
                log_likelihood = self(*inputs)
                loss = -1 * torch.mean(log_likelihood)
                loss += self._get_regularization_loss()
                loss.backward()
                optimizer.step()
                running_loss += loss  # BUG: graph-kept-alive
            epoch_loss = running_loss / len(batches)
            logging.info('Train Loss: %.6f', epoch_loss)
            self.epoch_losses.append(epoch_loss)
