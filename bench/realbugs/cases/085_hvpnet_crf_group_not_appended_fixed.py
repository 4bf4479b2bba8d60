# Source: https://github.com/zjunlp/HVPNeT/issues/5
# Category: optimizer-misses-params
# Expect: ok
"""A multimodal NER trainer builds AdamW parameter groups (BERT, visual-prompt gates, CRF+fc with a larger lr) but forgets
`parameters.append(params)` after the CRF group; a reader asked why crf and fc still 'train' and the authors confirmed the bug."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import optim

torch.manual_seed(0)


class Args:
    lr = 1e-3
    num_epochs = 3
    device = torch.device("cpu")
    warmup_ratio = 0.01


class CRF(nn.Module):
    def __init__(self, num_tags):
        super().__init__()
        self.transitions = nn.Parameter(torch.randn(num_tags, num_tags) * 0.1)

    def forward(self, emissions, tags):
        gold = emissions.gather(-1, tags.unsqueeze(-1)).squeeze(-1).sum(1)
        gold = gold + self.transitions[tags[:, :-1], tags[:, 1:]].sum(1)
        log_z = torch.logsumexp(emissions, dim=-1).sum(1) + torch.logsumexp(self.transitions, dim=(0, 1))
        return (gold - log_z).mean()


class HMNeTNERModel(nn.Module):
    def __init__(self, vocab, hidden, num_labels):
        super().__init__()
        self.bert = nn.Embedding(vocab, hidden)
        self.image_model = nn.Linear(12, hidden)
        self.encoder_conv = nn.Conv1d(hidden, hidden, 1)
        self.gates = nn.Linear(hidden, hidden)
        self.fc = nn.Linear(hidden, num_labels)
        self.crf = CRF(num_labels)

    def forward(self, input_ids, labels, images):
        text = self.bert(input_ids)
        visual = self.image_model(images).unsqueeze(1)
        prompt = self.encoder_conv(visual.transpose(1, 2)).transpose(1, 2)
        fused = text + torch.sigmoid(self.gates(text)) * prompt
        emissions = F.log_softmax(self.fc(fused), dim=-1)
        loss = -1 * self.crf(emissions, labels)
        return emissions, loss


class NERTrainer(object):
    def __init__(self, train_data, model, args):
        self.train_data = train_data
        self.model = model
        self.args = args
        self.optimizer = None

    def multiModal_before_train(self):
        parameters = []
        params = {"lr": self.args.lr, "weight_decay": 1e-2}
        params["params"] = []
        for name, param in self.model.named_parameters():
            if "bert" in name:
                params["params"].append(param)
        parameters.append(params)

        params = {"lr": self.args.lr, "weight_decay": 1e-2}
        params["params"] = []
        for name, param in self.model.named_parameters():
            if "encoder_conv" in name or "gates" in name:
                params["params"].append(param)
        parameters.append(params)

        params = {"lr": 5e-2, "weight_decay": 1e-2}
        params["params"] = []
        for name, param in self.model.named_parameters():
            if "crf" in name or name.startswith("fc"):
                params["params"].append(param)
        parameters.append(params)

        self.optimizer = optim.AdamW(parameters)

        for name, par in self.model.named_parameters():
            if "image_model" in name:
                par.requires_grad = False
        self.model.to(self.args.device)

    def train(self):
        self.multiModal_before_train()
        self.model.train()
        for epoch in range(1, self.args.num_epochs + 1):
            for batch in self.train_data:
                input_ids, labels, images = (t.to(self.args.device) for t in batch)
                _, loss = self.model(input_ids, labels, images)
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()


train_data = [(torch.randint(0, 50, (4, 10)), torch.randint(0, 5, (4, 10)), torch.randn(4, 12)) for _ in range(3)]
model = HMNeTNERModel(vocab=50, hidden=16, num_labels=5)
crf_before = model.crf.transitions.detach().clone()
fc_before = model.fc.weight.detach().clone()
bert_before = model.bert.weight.detach().clone()

trainer = NERTrainer(train_data, model, Args())
trainer.train()

assert not torch.equal(bert_before, model.bert.weight)
assert not torch.equal(crf_before, model.crf.transitions) and not torch.equal(fc_before, model.fc.weight)
print("OK: crf.transitions and fc.weight are trained too; optimizer groups:", len(trainer.optimizer.param_groups))
