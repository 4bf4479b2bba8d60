# Source: https://github.com/mindee/doctr/pull/379
# Category: nonscalar-backward
# Expect: ok
"""An OCR library's SAR/MASTER text recognisers returned a per-sample loss `ce_loss.unsqueeze(1)` from compute_loss, and the
training script called `train_loss.backward()` on it; the fix returns the batch mean."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

VOCAB = "abcdefghijklmnopqrstuvwxyz0123456789"


class RecognitionModel(nn.Module):
    def __init__(self, vocab, max_length=8, hidden=32):
        super().__init__()
        self.vocab = vocab
        self.max_length = max_length
        self.feat_extractor = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d((1, max_length + 1)))
        self.decoder = nn.Linear(16, len(vocab) + 1)

    def compute_target(self, gts):
        encoded = torch.full((len(gts), self.max_length + 1), len(self.vocab), dtype=torch.long)
        for i, word in enumerate(gts):
            encoded[i, : len(word)] = torch.tensor([self.vocab.index(c) for c in word])
        seq_len = torch.tensor([len(word) + 1 for word in gts])
        return encoded, seq_len

    def compute_loss(self, model_output, gt):
        gt, seq_len = self.compute_target(gt)
        input_len = model_output.shape[1]
        cce = F.cross_entropy(model_output.permute(0, 2, 1), gt, reduction="none")
        mask_2d = torch.arange(input_len)[None, :] >= seq_len[:, None]
        cce[mask_2d] = 0
        ce_loss = cce.sum(1) / seq_len.to(dtype=torch.float32)
        return ce_loss.mean()

    def forward(self, x, target=None, return_model_output=False):
        features = self.feat_extractor(x).squeeze(2).permute(0, 2, 1)
        logits = self.decoder(features)
        out = {}
        if return_model_output:
            out["out_map"] = logits
        if target is not None:
            out["loss"] = self.compute_loss(logits, target)
        return out


def fit_one_epoch(model, train_loader, optimizer):
    model.train()
    for images, targets in train_loader:
        train_loss = model(images, targets)["loss"]
        optimizer.zero_grad()
        train_loss.backward()
        optimizer.step()
    return train_loss.item()


model = RecognitionModel(VOCAB)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
train_loader = [(torch.rand(4, 3, 16, 64), ["cat", "dog42", "a", "house"]) for _ in range(2)]
last = fit_one_epoch(model, train_loader, optimizer)
assert model.decoder.weight.grad is not None
print("OK: trained, last loss %.4f" % last)
