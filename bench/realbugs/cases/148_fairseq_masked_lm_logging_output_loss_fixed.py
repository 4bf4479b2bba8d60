# Source: https://github.com/facebookresearch/fairseq/issues/2255
# Category: graph-kept-alive
# Expect: ok
"""The masked-LM criterion with the fix: logging_output keeps loss.detach(), a value without the step's graph."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class MaskedLmLoss:
    def __init__(self, padding_idx=0):
        self.padding_idx = padding_idx

    def __call__(self, model, sample, reduce=True):
        masked_tokens = sample["target"].ne(self.padding_idx)
        sample_size = masked_tokens.int().sum()
        logits = model(sample["net_input"]["src_tokens"])[masked_tokens]
        targets = sample["target"][masked_tokens]
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), reduction="sum")
        logging_output = {
            "loss": loss.detach(),
            "ntokens": sample["ntokens"],
            "nsentences": sample["target"].size(0),
            "sample_size": sample_size,
        }
        return loss, sample_size, logging_output


class RobertaLM(nn.Module):
    def __init__(self, vocab=40, dim=16):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.layer = nn.TransformerEncoderLayer(dim, 2, 32, batch_first=True)
        self.lm_head = nn.Linear(dim, vocab)

    def forward(self, src_tokens):
        return self.lm_head(self.layer(self.embed(src_tokens)))


class Trainer:
    def __init__(self, model, criterion, log_interval=100):
        self.model, self.criterion = model, criterion
        self.optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
        self.logging_outputs = []

    def train_step(self, sample):
        self.model.train()
        self.optimizer.zero_grad()
        loss, sample_size, logging_output = self.criterion(self.model, sample)
        (loss / sample_size).backward()
        self.optimizer.step()
        self.logging_outputs.append(logging_output)


def make_sample(bsz=4, tgt_len=10, vocab=40):
    src = torch.randint(1, vocab, (bsz, tgt_len))
    target = torch.where(torch.rand(bsz, tgt_len) < 0.15, src, torch.zeros_like(src))
    target[:, 0] = src[:, 0]
    return {"net_input": {"src_tokens": src}, "target": target, "ntokens": int(target.ne(0).sum())}


trainer = Trainer(RobertaLM(), MaskedLmLoss())
for _ in range(5):
    trainer.train_step(make_sample())
kept = [lo["loss"].grad_fn for lo in trainer.logging_outputs]
print("loss values:", [round(float(lo["loss"]) / int(lo["sample_size"]), 3) for lo in trainer.logging_outputs])
assert all(fn is None for fn in kept)
