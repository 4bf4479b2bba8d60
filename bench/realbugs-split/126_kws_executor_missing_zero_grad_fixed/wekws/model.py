"""The keyword-spotting model and its loss."""
import torch
import torch.nn as nn
import torch.nn.functional as F


def max_pooling_loss(logits, target, lengths):
    probs = logits.sigmoid()
    max_probs = torch.stack([probs[i, :lengths[i]].max(0)[0] for i in range(logits.size(0))])
    onehot = F.one_hot(target, probs.size(-1) + 1)[:, 1:].float()
    loss = F.binary_cross_entropy(max_probs, onehot)
    acc = ((max_probs > 0.5).float() == onehot).float().mean().item()
    return loss, acc


def criterion(loss_type, logits, target, lengths):
    assert loss_type == 'max_pooling'
    return max_pooling_loss(logits, target, lengths)


class KWSModel(nn.Module):
    def __init__(self, idim=10, hdim=16, num_keywords=2):
        super().__init__()
        self.backbone = nn.GRU(idim, hdim, batch_first=True)
        self.classifier = nn.Linear(hdim, num_keywords)

    def forward(self, feats):
        out, _ = self.backbone(feats)
        return self.classifier(out)
