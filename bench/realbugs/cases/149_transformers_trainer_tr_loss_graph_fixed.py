# Source: https://github.com/huggingface/transformers/pull/6999
# Category: graph-kept-alive
# Expect: ok
"""The Trainer with the fix PR: training_step() returns loss.detach(), so tr_loss accumulates plain values."""
import torch
import torch.nn as nn

torch.manual_seed(0)


class BertForSequenceClassification(nn.Module):
    def __init__(self, vocab=30, dim=16, num_labels=2):
        super().__init__()
        self.embeddings = nn.Embedding(vocab, dim)
        self.classifier = nn.Linear(dim, num_labels)

    def forward(self, input_ids, labels):
        logits = self.classifier(self.embeddings(input_ids).mean(1))
        return (nn.functional.cross_entropy(logits, labels), logits)


class Trainer:
    def __init__(self, model, train_dataset, logging_steps=50):
        self.model = model
        self.train_dataset = train_dataset
        self.logging_steps = logging_steps
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=5e-5)
        self.tr_loss = None

    def training_step(self, model, inputs):
        model.train()
        outputs = model(**inputs)
        loss = outputs[0]
        loss.backward()
        return loss.detach()

    def train(self):
        tr_loss = torch.tensor(0.0)
        for step, inputs in enumerate(self.train_dataset):
            tr_loss += self.training_step(self.model, inputs)
            self.optimizer.step()
            self.model.zero_grad()
        self.tr_loss = tr_loss
        return tr_loss.item() / len(self.train_dataset)


dataset = [{"input_ids": torch.randint(0, 30, (4, 8)), "labels": torch.randint(0, 2, (4,))} for _ in range(6)]
trainer = Trainer(BertForSequenceClassification(), dataset)
print("average training loss", trainer.train())
assert trainer.tr_loss.grad_fn is None
