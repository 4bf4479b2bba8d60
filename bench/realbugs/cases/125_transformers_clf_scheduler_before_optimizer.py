# Source: https://github.com/ThilinaRajapakse/pytorch-transformers-classification/issues/21
# Category: scheduler-before-optimizer
# Expect: warns UserWarning: Detected call of `lr_scheduler.step()` before `optimizer.step()`
"""A sequence-classification fine-tuning notebook steps its warmup-linear LR schedule before AdamW at every
(accumulated) update, so torch warns and the first learning rate of the schedule is skipped."""
import math

import torch
import torch.nn as nn
from torch.optim import AdamW
from torch.utils.data import DataLoader, RandomSampler, TensorDataset

torch.manual_seed(0)
device = torch.device("cpu")

args = {'train_batch_size': 4, 'gradient_accumulation_steps': 2, 'num_train_epochs': 2,
        'weight_decay': 0.0, 'learning_rate': 4e-5, 'adam_epsilon': 1e-8, 'warmup_ratio': 0.06,
        'warmup_steps': 0, 'max_grad_norm': 1.0}


def WarmupLinearSchedule(optimizer, warmup_steps, t_total):
    def lr_lambda(step):
        if step < warmup_steps:
            return float(step) / float(max(1, warmup_steps))
        return max(0.0, float(t_total - step) / float(max(1.0, t_total - warmup_steps)))
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda)


class TinySequenceClassifier(nn.Module):
    def __init__(self, vocab=50, dim=16, num_labels=2):
        super().__init__()
        self.embeddings = nn.Embedding(vocab, dim)
        self.LayerNorm = nn.LayerNorm(dim)
        self.classifier = nn.Linear(dim, num_labels)

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, labels=None):
        h = self.LayerNorm(self.embeddings(input_ids))
        h = (h * attention_mask.unsqueeze(-1)).sum(1) / attention_mask.sum(1, keepdim=True)
        logits = self.classifier(h)
        loss = nn.functional.cross_entropy(logits, labels)
        return (loss, logits)


def train(train_dataset, model):
    train_sampler = RandomSampler(train_dataset)
    train_dataloader = DataLoader(train_dataset, sampler=train_sampler, batch_size=args['train_batch_size'])
    t_total = len(train_dataloader) // args['gradient_accumulation_steps'] * args['num_train_epochs']

    no_decay = ['bias', 'LayerNorm.weight']
    optimizer_grouped_parameters = [
        {'params': [p for n, p in model.named_parameters() if not any(nd in n for nd in no_decay)], 'weight_decay': args['weight_decay']},
        {'params': [p for n, p in model.named_parameters() if any(nd in n for nd in no_decay)], 'weight_decay': 0.0}
    ]
    warmup_steps = math.ceil(t_total * args['warmup_ratio'])
    args['warmup_steps'] = warmup_steps if args['warmup_steps'] == 0 else args['warmup_steps']
    optimizer = AdamW(optimizer_grouped_parameters, lr=args['learning_rate'], eps=args['adam_epsilon'])
    scheduler = WarmupLinearSchedule(optimizer, warmup_steps=args['warmup_steps'], t_total=t_total)

    global_step = 0
    tr_loss = 0.0
    lrs = []
    model.zero_grad()
    for _ in range(int(args['num_train_epochs'])):
        for step, batch in enumerate(train_dataloader):
            model.train()
            batch = tuple(t.to(device) for t in batch)
            inputs = {'input_ids': batch[0], 'attention_mask': batch[1], 'token_type_ids': batch[2], 'labels': batch[3]}
            outputs = model(**inputs)
            loss = outputs[0]
            if args['gradient_accumulation_steps'] > 1:
                loss = loss / args['gradient_accumulation_steps']
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), args['max_grad_norm'])
            tr_loss += loss.item()
            if (step + 1) % args['gradient_accumulation_steps'] == 0:
                lrs.append(optimizer.param_groups[0]['lr'])
                scheduler.step()  # BUG: scheduler-before-optimizer
                optimizer.step()
                model.zero_grad()
                global_step += 1
    return global_step, tr_loss / global_step, lrs


n = 32
input_ids = torch.randint(0, 50, (n, 10))
train_dataset = TensorDataset(input_ids, torch.ones(n, 10), torch.zeros(n, 10, dtype=torch.long), torch.randint(0, 2, (n,)))
global_step, tr_loss, lrs = train(train_dataset, TinySequenceClassifier())
print("global_step", global_step, "average loss", round(tr_loss, 4), "lrs", [f"{lr:.2e}" for lr in lrs])
