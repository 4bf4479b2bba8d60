# Source: https://github.com/BatsResearch/labelmodels/issues/4
# Category: graph-kept-alive
# Expect: silent: running_loss sums the loss tensors themselves, so every batch's graph stays referenced until the epoch ends
"""A weak-supervision label model's internal optimisation loop adds each batch loss tensor to running_loss
(for logging), keeping all graphs of the epoch alive; the reporter's GPU ran out of memory on a big training set."""
import logging

import torch
import torch.nn as nn

torch.manual_seed(0)


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


class NaiveBayes(LabelModel):
    """Class-conditional model of labelling-function votes (0 = abstain)."""

    def __init__(self, num_classes, num_lfs, init_acc=0.7, acc_prior=0.01):
        super().__init__()
        self.num_classes = num_classes
        self.init_acc = init_acc
        self.acc_prior = acc_prior
        self.accuracy = nn.Parameter(torch.full((num_lfs, num_classes), init_acc))
        self.propensity = nn.Parameter(torch.zeros(num_lfs))
        self.class_balance = nn.Parameter(torch.zeros(num_classes))

    def forward(self, votes):
        # votes: (batch, num_lfs) in {0..k}; one-hot for classes 1..k
        onehot = torch.stack([(votes == k + 1).float() for k in range(self.num_classes)], dim=2)
        voted = (votes != 0).float()
        acc = torch.log_softmax(torch.stack([self.accuracy, -self.accuracy], 2), 2)[..., 0]
        cll = (onehot * acc.unsqueeze(0)).sum(1) + (voted * self.propensity).sum(1, keepdim=True)
        return torch.logsumexp(cll + torch.log_softmax(self.class_balance, 0), dim=1)

    def _get_regularization_loss(self):
        return self.acc_prior * torch.norm(self.accuracy - self.init_acc)

    def estimate_label_model(self, votes, config=None):
        if config is None:
            config = LearningConfig()
        batches = [(votes[i:i + 16],) for i in range(0, len(votes), 16)]
        self._do_estimate_label_model(batches, config)


votes = torch.randint(0, 3, (64, 5))
model = NaiveBayes(num_classes=2, num_lfs=5)
model.estimate_label_model(votes)

last = model.epoch_losses[-1]
assert isinstance(last, torch.Tensor) and last.grad_fn is not None
print("EVIDENCE: the epoch loss kept for logging still has grad_fn", type(last.grad_fn).__name__,
      "so the graphs of all", len(votes) // 16, "batches of the epoch stay in memory")
