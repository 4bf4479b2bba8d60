# Source: https://github.com/graykode/nlp-tutorial/issues/29
# Category: module-in-forward
# Expect: ok
"""A popular Transformer tutorial builds the multi-head attention output projection as
`nn.Linear(n_heads * d_v, d_model)(context)` inside forward(); the issue points out this layer is never trained."""
import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim

torch.manual_seed(0)

sentences = ['ich mochte ein bier P', 'S i want a beer', 'i want a beer E']
src_vocab = {w: i for i, w in enumerate(sentences[0].split())}
tgt_words = sorted(set((sentences[1] + ' ' + sentences[2]).split()))
tgt_vocab = {w: i for i, w in enumerate(tgt_words)}
src_vocab_size, tgt_vocab_size = len(src_vocab), len(tgt_vocab)

d_model = 16
d_ff = 32
d_k = d_v = 4
n_heads = 4


def make_batch(sentences):
    input_batch = [[src_vocab[n] for n in sentences[0].split()]]
    output_batch = [[tgt_vocab[n] for n in sentences[1].split()]]
    target_batch = [[tgt_vocab[n] for n in sentences[2].split()]]
    return torch.LongTensor(input_batch), torch.LongTensor(output_batch), torch.LongTensor(target_batch)


def get_attn_pad_mask(seq_q, seq_k):
    batch_size, len_q = seq_q.size()
    batch_size, len_k = seq_k.size()
    return seq_k.eq(src_vocab['P']).unsqueeze(1).expand(batch_size, len_q, len_k)


class ScaledDotProductAttention(nn.Module):
    def forward(self, Q, K, V, attn_mask):
        scores = torch.matmul(Q, K.transpose(-1, -2)) / np.sqrt(d_k)
        scores = scores.masked_fill(attn_mask, -1e9)
        attn = nn.Softmax(dim=-1)(scores)
        return torch.matmul(attn, V), attn


class MultiHeadAttention(nn.Module):
    def __init__(self):
        super(MultiHeadAttention, self).__init__()
        self.W_Q = nn.Linear(d_model, d_k * n_heads)
        self.W_K = nn.Linear(d_model, d_k * n_heads)
        self.W_V = nn.Linear(d_model, d_v * n_heads)
        self.linear = nn.Linear(n_heads * d_v, d_model)
        self.layer_norm = nn.LayerNorm(d_model)

    def forward(self, Q, K, V, attn_mask):
        residual, batch_size = Q, Q.size(0)
        q_s = self.W_Q(Q).view(batch_size, -1, n_heads, d_k).transpose(1, 2)
        k_s = self.W_K(K).view(batch_size, -1, n_heads, d_k).transpose(1, 2)
        v_s = self.W_V(V).view(batch_size, -1, n_heads, d_v).transpose(1, 2)
        attn_mask = attn_mask.unsqueeze(1).repeat(1, n_heads, 1, 1)
        context, attn = ScaledDotProductAttention()(q_s, k_s, v_s, attn_mask)
        context = context.transpose(1, 2).contiguous().view(batch_size, -1, n_heads * d_v)
        output = self.linear(context)
        return self.layer_norm(output + residual), attn


class PoswiseFeedForwardNet(nn.Module):
    def __init__(self):
        super(PoswiseFeedForwardNet, self).__init__()
        self.conv1 = nn.Conv1d(in_channels=d_model, out_channels=d_ff, kernel_size=1)
        self.conv2 = nn.Conv1d(in_channels=d_ff, out_channels=d_model, kernel_size=1)

    def forward(self, inputs):
        output = nn.ReLU()(self.conv1(inputs.transpose(1, 2)))
        return self.conv2(output).transpose(1, 2) + inputs


class EncoderLayer(nn.Module):
    def __init__(self):
        super(EncoderLayer, self).__init__()
        self.enc_self_attn = MultiHeadAttention()
        self.pos_ffn = PoswiseFeedForwardNet()

    def forward(self, enc_inputs, enc_self_attn_mask):
        enc_outputs, attn = self.enc_self_attn(enc_inputs, enc_inputs, enc_inputs, enc_self_attn_mask)
        return self.pos_ffn(enc_outputs), attn


class Transformer(nn.Module):
    def __init__(self):
        super(Transformer, self).__init__()
        self.src_emb = nn.Embedding(src_vocab_size, d_model)
        self.tgt_emb = nn.Embedding(tgt_vocab_size, d_model)
        self.encoder_layer = EncoderLayer()
        self.dec_enc_attn = MultiHeadAttention()
        self.projection = nn.Linear(d_model, tgt_vocab_size, bias=False)

    def forward(self, enc_inputs, dec_inputs):
        enc_outputs, _ = self.encoder_layer(self.src_emb(enc_inputs), get_attn_pad_mask(enc_inputs, enc_inputs))
        dec_outputs, _ = self.dec_enc_attn(self.tgt_emb(dec_inputs), enc_outputs, enc_outputs,
                                           get_attn_pad_mask(dec_inputs, enc_inputs))
        dec_logits = self.projection(dec_outputs)
        return dec_logits.view(-1, dec_logits.size(-1))


model = Transformer()
criterion = nn.CrossEntropyLoss()
optimizer = optim.Adam(model.parameters(), lr=0.01)
enc_inputs, dec_inputs, target_batch = make_batch(sentences)

for epoch in range(30):
    optimizer.zero_grad()
    outputs = model(enc_inputs, dec_inputs)
    loss = criterion(outputs, target_batch.contiguous().view(-1))
    loss.backward()
    optimizer.step()

model.eval()
with torch.no_grad():
    out1, out2 = model(enc_inputs, dec_inputs), model(enc_inputs, dec_inputs)
assert len(list(model.dec_enc_attn.parameters())) == 10  # W_Q, W_K, W_V, linear, layer_norm
assert torch.equal(out1, out2)
assert not torch.equal(model.dec_enc_attn.layer_norm.weight, torch.ones(d_model))
print("OK: the output projection and LayerNorm are registered, trained, and the model is deterministic in eval")
