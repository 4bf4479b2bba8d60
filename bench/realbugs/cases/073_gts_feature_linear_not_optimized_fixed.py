# Source: https://github.com/NJUNLP/GTS/issues/13
# Category: optimizer-misses-params
# Expect: ok
"""A grid-tagging opinion-triplet model builds Adam from two explicit param groups (the BERT encoder and the
classifier), forgetting the feature_linear layer of its multi-hop inference; the authors confirmed it was never trained."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class Args(object):
    device = torch.device("cpu")
    bert_feature_dim = 16
    class_num = 4
    nhops = 1
    epochs = 3
    vocab = 50


class TinyBert(nn.Module):
    def __init__(self, vocab, dim):
        super().__init__()
        self.embeddings = nn.Embedding(vocab, dim)
        self.encoder = nn.TransformerEncoderLayer(dim, 2, 32, dropout=0.0, batch_first=True)

    def forward(self, tokens, masks):
        return self.encoder(self.embeddings(tokens), src_key_padding_mask=masks == 0)


class MultiInferBert(nn.Module):
    def __init__(self, args):
        super(MultiInferBert, self).__init__()
        self.args = args
        self.bert = TinyBert(args.vocab, args.bert_feature_dim)
        self.cls_linear = nn.Linear(args.bert_feature_dim * 2, args.class_num)
        self.feature_linear = nn.Linear(args.bert_feature_dim * 2 + args.class_num * 3, args.bert_feature_dim * 2)
        self.dropout_output = nn.Dropout(0.1)

    def multi_hops(self, features, lengths, mask, k):
        max_length = features.shape[1]
        mask = mask[:, :max_length, :max_length]
        logits_list = []
        logits = self.cls_linear(features)
        logits_list.append(logits)
        for i in range(k):
            probs = logits
            logits = probs * mask
            logits_a = torch.max(logits, dim=1)[0]
            logits_b = torch.max(logits, dim=2)[0]
            logits = torch.cat([logits_a.unsqueeze(3), logits_b.unsqueeze(3)], dim=3)
            logits = torch.max(logits, dim=3)[0]
            logits = logits.unsqueeze(2).expand([-1, -1, max_length, -1])
            logits_T = logits.transpose(1, 2)
            logits = torch.cat([logits, logits_T], dim=3)
            new_features = torch.cat([features, logits, probs], dim=3)
            features = self.feature_linear(new_features)
            logits = self.cls_linear(features)
            logits_list.append(logits)
        return logits_list

    def forward(self, tokens, masks):
        bert_feature = self.dropout_output(self.bert(tokens, masks))
        n = bert_feature.shape[1]
        features = torch.cat([bert_feature.unsqueeze(2).expand(-1, -1, n, -1),
                              bert_feature.unsqueeze(1).expand(-1, n, -1, -1)], dim=3)
        grid_mask = (masks.unsqueeze(2) * masks.unsqueeze(1)).unsqueeze(3).expand(-1, -1, -1, self.args.class_num).float()
        logits = self.multi_hops(features, masks.sum(1), grid_mask, self.args.nhops)
        return logits[-1]


def train(args, batches):
    model = MultiInferBert(args).to(args.device)
    optimizer = torch.optim.Adam([
        {'params': model.bert.parameters(), 'lr': 5e-5},
        {'params': model.cls_linear.parameters()},
        {'params': model.feature_linear.parameters()}
    ], lr=5e-3)
    feature_before = model.feature_linear.weight.detach().clone()
    cls_before = model.cls_linear.weight.detach().clone()
    for i in range(args.epochs):
        for tokens, masks, tags in batches:
            preds = model(tokens, masks)
            preds_flatten = preds.reshape([-1, preds.shape[3]])
            tags_flatten = tags.reshape([-1])
            loss = F.cross_entropy(preds_flatten, tags_flatten, ignore_index=-1)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return model, feature_before, cls_before


args = Args()
batches = []
for _ in range(2):
    tokens = torch.randint(1, args.vocab, (4, 6))
    masks = torch.ones(4, 6, dtype=torch.long)
    tags = torch.randint(0, args.class_num, (4, 6, 6))
    batches.append((tokens, masks, tags))
model, feature_before, cls_before = train(args, batches)

assert not torch.equal(feature_before, model.feature_linear.weight)
assert not torch.equal(cls_before, model.cls_linear.weight)
print("OK: feature_linear and cls_linear were both updated")
