# Source: https://github.com/huggingface/pytorch-image-models/pull/1500
# Category: inplace-on-saved
# Expect: ok
"""Fixed twin: label smoothing builds a new tensor, as in the PR.
timm's AsymmetricLossSingleLabel builds one-hot targets, uses them to weight the predicted probabilities
(`xs_pos * targets`, which saves targets for backward), and then applies label smoothing to the same tensor in
place (`targets_classes.mul_(1 - eps).add_(eps / num_classes)`). Backward finds a saved tensor modified; the PR
replaces the in-place operators with out-of-place ones."""
import torch
import torch.nn as nn

torch.manual_seed(0)


class AsymmetricLossSingleLabel(nn.Module):
    def __init__(self, gamma_pos=1, gamma_neg=4, eps: float = 0.1, reduction="mean"):
        super().__init__()
        self.eps = eps
        self.logsoftmax = nn.LogSoftmax(dim=-1)
        self.targets_classes = []
        self.gamma_pos = gamma_pos
        self.gamma_neg = gamma_neg
        self.reduction = reduction

    def forward(self, inputs, target):
        num_classes = inputs.size()[-1]
        log_preds = self.logsoftmax(inputs)
        self.targets_classes = torch.zeros_like(inputs).scatter_(1, target.long().unsqueeze(1), 1)

        targets = self.targets_classes
        anti_targets = 1 - targets
        xs_pos = torch.exp(log_preds)
        xs_neg = 1 - xs_pos
        xs_pos = xs_pos * targets
        xs_neg = xs_neg * anti_targets
        asymmetric_w = torch.pow(1 - xs_pos - xs_neg, self.gamma_pos * targets + self.gamma_neg * anti_targets)
        log_preds = log_preds * asymmetric_w

        if self.eps > 0:
            self.targets_classes = self.targets_classes.mul(1 - self.eps).add(self.eps / num_classes)

        loss = -self.targets_classes.mul(log_preds)
        loss = loss.sum(dim=-1)
        if self.reduction == "mean":
            loss = loss.mean()
        return loss


model = nn.Linear(10, 5)
train_loss_fn = AsymmetricLossSingleLabel(eps=0.1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for batch_idx in range(2):
    input, target = torch.randn(8, 10), torch.randint(0, 5, (8,))
    output = model(input)
    loss = train_loss_fn(output, target)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    assert model.weight.grad is not None
