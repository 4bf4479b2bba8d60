# Source: https://github.com/Hunter-DDM/knowledge-neurons/issues/14
# Category: inplace-on-leaf
# Expect: ok
"""The knowledge-neurons editing script rewrites a column of a BERT FFN output weight per knowledge neuron
(`weight[:, pos] -= ori_pred_emb * lambda`) outside no_grad, and the reporter got the leaf-view in-place error."""
import torch
import torch.nn as nn

torch.manual_seed(0)
device = torch.device("cpu")


class FFNOutput(nn.Module):
    def __init__(self, intermediate, hidden):
        super().__init__()
        self.dense = nn.Linear(intermediate, hidden)


class Layer(nn.Module):
    def __init__(self, hidden, intermediate):
        super().__init__()
        self.intermediate = nn.Linear(hidden, intermediate)
        self.output = FFNOutput(intermediate, hidden)

    def forward(self, x):
        return x + self.output.dense(torch.relu(self.intermediate(x)))


class Encoder(nn.Module):
    def __init__(self, n_layers, hidden, intermediate):
        super().__init__()
        self.layer = nn.ModuleList([Layer(hidden, intermediate) for _ in range(n_layers)])


class Bert(nn.Module):
    def __init__(self, vocab, hidden, intermediate, n_layers):
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab, hidden)
        self.encoder = Encoder(n_layers, hidden, intermediate)


class BertForMaskedLM(nn.Module):
    def __init__(self, vocab=40, hidden=8, intermediate=32, n_layers=3):
        super().__init__()
        self.bert = Bert(vocab, hidden, intermediate, n_layers)

    def forward(self, input_ids):
        x = self.bert.word_embeddings(input_ids)
        for layer in self.bert.encoder.layer:
            x = layer(x)
        return x @ self.bert.word_embeddings.weight.t()


def edit_knowledge(model, kn_list, ori_pred_label, tgt_label, lambda_list_1, lambda_list_2):
    with torch.no_grad():
        word_emb = model.bert.word_embeddings.weight
        ori_pred_emb = word_emb[ori_pred_label]
        tgt_emb = word_emb[tgt_label]
        for i, (layer, pos) in enumerate(kn_list):
            model.bert.encoder.layer[layer].output.dense.weight[:, pos] -= ori_pred_emb * lambda_list_1[i]
            model.bert.encoder.layer[layer].output.dense.weight[:, pos] += tgt_emb * lambda_list_2[i]


model = BertForMaskedLM().to(device)
model.eval()
input_ids = torch.tensor([[3, 7, 11, 5]])
mask_pos = 2
with torch.no_grad():
    logits = model(input_ids)
ori_pred_label = logits[0, mask_pos].argmax().item()
tgt_label = (ori_pred_label + 1) % 40
kn_list = [(0, 4), (1, 17), (2, 9)]
before = model.bert.encoder.layer[1].output.dense.weight[:, 17].detach().clone()

edit_knowledge(model, kn_list, ori_pred_label, tgt_label, [1.0] * 3, [1.0] * 3)
after = model.bert.encoder.layer[1].output.dense.weight[:, 17]
emb = model.bert.word_embeddings.weight
assert torch.allclose(after, before - emb[ori_pred_label] + emb[tgt_label])
assert all(p.is_leaf for p in model.parameters())
print("OK: the neuron's column moved from the original answer's embedding towards the target's")
