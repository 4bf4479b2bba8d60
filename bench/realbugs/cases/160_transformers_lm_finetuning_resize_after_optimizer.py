# Source: https://github.com/huggingface/transformers/pull/3532
# Category: optimizer-stale-params
# Expect: silent: the token embedding matrix is resized after the optimizer was built, so the optimizer keeps updating the old (discarded) embedding Parameter and the model's new embeddings never change
"""run_lm_finetuning.py added special tokens to the tokenizer and called model.resize_token_embeddings() inside
train(), after the optimizer had been given model.parameters(). Resizing replaces the embedding Parameter, so the
optimizer steps a tensor the model no longer uses. The PR moves the resize before the optimizer is built."""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class GPT2LMHeadModel(nn.Module):
    def __init__(self, vocab=40, dim=16):
        super().__init__()
        self.wte = nn.Embedding(vocab, dim)
        self.h = nn.Linear(dim, dim)

    def get_input_embeddings(self):
        return self.wte

    def resize_token_embeddings(self, new_num_tokens):
        old = self.wte
        self.wte = nn.Embedding(new_num_tokens, old.embedding_dim)
        with torch.no_grad():
            self.wte.weight[:old.num_embeddings] = old.weight

    def forward(self, input_ids, labels):
        logits = self.h(self.wte(input_ids)) @ self.wte.weight.t()
        return F.cross_entropy(logits[:, :-1].reshape(-1, logits.size(-1)), labels[:, 1:].reshape(-1))


def train(args, train_dataset, model, tokenizer_len):
    no_decay = ["bias"]
    optimizer_grouped_parameters = [
        {"params": [p for n, p in model.named_parameters() if not any(nd in n for nd in no_decay)], "weight_decay": 0.0},
        {"params": [p for n, p in model.named_parameters() if any(nd in n for nd in no_decay)], "weight_decay": 0.0},
    ]
    optimizer = torch.optim.AdamW(optimizer_grouped_parameters, lr=args.learning_rate)
    model.resize_token_embeddings(tokenizer_len)  # BUG: optimizer-stale-params
    model.train()
    for batch in train_dataset:
        loss = model(batch, labels=batch)
        loss.backward()
        optimizer.step()
        model.zero_grad()


args = argparse.Namespace(learning_rate=1e-2)
model = GPT2LMHeadModel()
tokenizer_len = 42  # two added special tokens
dataset = [torch.randint(0, 42, (2, 6)) for _ in range(3)]
before = model.get_input_embeddings().weight.detach().clone()
train(args, dataset, model, tokenizer_len)
after = model.get_input_embeddings().weight.detach()
print("embedding rows changed by training:", int((after[:40] != before).any(1).sum()))
assert torch.equal(after[:40], before)
print("EVIDENCE: the resized token embeddings are bit-for-bit unchanged after", len(dataset), "optimizer steps")
