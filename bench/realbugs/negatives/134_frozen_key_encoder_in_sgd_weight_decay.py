# Source: https://github.com/facebookresearch/moco/issues/14
# Category: freeze-after-backward
# Expect: ok
"""MoCo hands model.parameters() (query and key encoder) to SGD with momentum and weight decay although the key
encoder has requires_grad=False from construction on; as the maintainer answers, torch.optim.SGD skips parameters
whose .grad is None, so weight decay never touches the frozen encoder."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class MoCoLite(nn.Module):
    def __init__(self, dim=8, T=0.2):
        super().__init__()
        self.T = T
        self.encoder_q = nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, dim))
        self.encoder_k = nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, dim))
        for param_q, param_k in zip(self.encoder_q.parameters(), self.encoder_k.parameters()):
            param_k.data.copy_(param_q.data)  # initialize
            param_k.requires_grad = False  # not updated by gradient

    def forward(self, im_q, im_k):
        q = F.normalize(self.encoder_q(im_q), dim=1)
        with torch.no_grad():
            k = F.normalize(self.encoder_k(im_k), dim=1)
        logits = q @ k.t() / self.T
        labels = torch.arange(logits.shape[0])
        return logits, labels


model = MoCoLite()
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.03, momentum=0.9, weight_decay=1e-2)
k_before = [p.detach().clone() for p in model.encoder_k.parameters()]
q_before = [p.detach().clone() for p in model.encoder_q.parameters()]

for i in range(5):
    x = torch.randn(16, 12)
    output, target = model(x + 0.05 * torch.randn_like(x), x + 0.05 * torch.randn_like(x))
    loss = criterion(output, target)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()

assert all(p.grad is None for p in model.encoder_k.parameters())
assert all(torch.equal(b, p) for b, p in zip(k_before, model.encoder_k.parameters()))
assert all(not torch.equal(b, p) for b, p in zip(q_before, model.encoder_q.parameters()))
print("OK: frozen key encoder untouched by SGD weight decay; query encoder trained, loss", round(loss.item(), 4))
