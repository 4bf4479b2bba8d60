# Source: https://github.com/TorchSSL/TorchSSL/pull/59
# Category: clip-scaled-grads
# Expect: silent: with amp the FixMatch trainer clips the scaled gradients to args.clip, so after scaler.step() unscales them each update is shrunk by the loss scale
"""A semi-supervised FixMatch trainer class back-propagates the supervised plus masked pseudo-label loss through a
GradScaler and, when args.clip > 0, clips the gradients before scaler.step() without unscaling them first; the fix
PR adds scaler.unscale_(optimizer) before the clip."""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class WideResNetHead(nn.Module):
    def __init__(self, in_dim=32, num_classes=5):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(in_dim, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU())
        self.fc = nn.Linear(64, num_classes)

    def forward(self, x):
        return self.fc(self.backbone(x))


class FixMatch:
    def __init__(self, net_builder, num_classes, p_cutoff=0.5, lambda_u=1.0):
        self.model = net_builder(num_classes=num_classes)
        self.p_cutoff, self.lambda_u = p_cutoff, lambda_u
        self.optimizer = None
        self.scaler = None
        self.step_grad_norms = []

    def set_optimizer(self, optimizer):
        self.optimizer = optimizer

    def train(self, args, loader):
        self.scaler = torch.amp.GradScaler("cpu", enabled=args.amp)
        self.model.train()
        for x_lb, y_lb, x_ulb_w, x_ulb_s in loader:
            num_lb = x_lb.shape[0]
            inputs = torch.cat((x_lb, x_ulb_w, x_ulb_s))
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.amp):
                logits = self.model(inputs).float()
            logits_x_lb = logits[:num_lb]
            logits_x_ulb_w, logits_x_ulb_s = logits[num_lb:].chunk(2)
            sup_loss = F.cross_entropy(logits_x_lb, y_lb)
            probs = torch.softmax(logits_x_ulb_w.detach(), dim=-1)
            max_probs, pseudo = probs.max(dim=-1)
            mask = max_probs.ge(self.p_cutoff).float()
            unsup_loss = (F.cross_entropy(logits_x_ulb_s, pseudo, reduction="none") * mask).mean()
            total_loss = sup_loss + self.lambda_u * unsup_loss

            if args.amp:
                self.scaler.scale(total_loss).backward()
                if args.clip > 0:  # BUG: clip-scaled-grads
                    torch.nn.utils.clip_grad_norm_(self.model.parameters(), args.clip)
                self.scaler.step(self.optimizer)
                self.scaler.update()
            self.step_grad_norms.append(
                torch.norm(torch.stack([p.grad.norm() for p in self.model.parameters()])).item())
            self.model.zero_grad()


args = argparse.Namespace(amp=True, clip=1.0, lr=0.03)
loader = [(torch.randn(4, 32), torch.randint(0, 5, (4,)), torch.randn(8, 32), torch.randn(8, 32)) for _ in range(3)]
alg = FixMatch(WideResNetHead, num_classes=5)
alg.set_optimizer(torch.optim.SGD(alg.model.parameters(), lr=args.lr, momentum=0.9))
alg.train(args, loader)
print("gradient norm per step:", [f"{n:.2e}" for n in alg.step_grad_norms])
assert max(alg.step_grad_norms) < 1e-3
print("EVIDENCE: the optimizer stepped with gradient norm", f"{max(alg.step_grad_norms):.1e}", "= args.clip / scale")
