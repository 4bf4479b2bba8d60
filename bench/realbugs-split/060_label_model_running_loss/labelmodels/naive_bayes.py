"""The naive Bayes label model."""
import torch
import torch.nn as nn

from .label_model import LabelModel, LearningConfig


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
