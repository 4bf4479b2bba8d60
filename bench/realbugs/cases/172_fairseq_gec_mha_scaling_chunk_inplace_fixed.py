# Source: https://github.com/kanyun-inc/fairseq-gec/issues/45
# Category: view-inplace-forbidden
# Expect: ok
"""Fixed twin: q is scaled out of place, as in the thread.
fairseq's (0.6-era) MultiheadAttention, vendored by fairseq-gec, projects q, k and v with one in_proj matrix and
splits the result with chunk(3); it then scales q in place (`q *= self.scaling`). q is one of several views that
chunk returns, and recent PyTorch forbids modifying such a view in place; the thread's fix is
`q = q * self.scaling`."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class MultiheadAttention(nn.Module):
    def __init__(self, embed_dim, num_heads):
        super().__init__()
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.scaling = self.head_dim ** -0.5
        self.in_proj_weight = nn.Parameter(torch.empty(3 * embed_dim, embed_dim))
        self.in_proj_bias = nn.Parameter(torch.zeros(3 * embed_dim))
        self.out_proj = nn.Linear(embed_dim, embed_dim)
        nn.init.xavier_uniform_(self.in_proj_weight)

    def in_proj_qkv(self, query):
        return F.linear(query, self.in_proj_weight, self.in_proj_bias).chunk(3, dim=-1)

    def forward(self, query):
        tgt_len, bsz, embed_dim = query.size()
        q, k, v = self.in_proj_qkv(query)
        q = q * self.scaling
        q = q.contiguous().view(tgt_len, bsz * self.num_heads, self.head_dim).transpose(0, 1)
        k = k.contiguous().view(-1, bsz * self.num_heads, self.head_dim).transpose(0, 1)
        v = v.contiguous().view(-1, bsz * self.num_heads, self.head_dim).transpose(0, 1)
        attn_weights = F.softmax(torch.bmm(q, k.transpose(1, 2)), dim=-1)
        attn = torch.bmm(attn_weights, v).transpose(0, 1).contiguous().view(tgt_len, bsz, embed_dim)
        return self.out_proj(attn)


class TransformerEncoderLayer(nn.Module):
    def __init__(self, embed_dim=16, heads=4):
        super().__init__()
        self.self_attn = MultiheadAttention(embed_dim, heads)
        self.fc = nn.Linear(embed_dim, embed_dim)
        self.norm = nn.LayerNorm(embed_dim)

    def forward(self, x):
        x = self.norm(x + self.self_attn(x))
        return x + F.relu(self.fc(x))


layer = TransformerEncoderLayer()
optimizer = torch.optim.Adam(layer.parameters(), lr=1e-3)
src = torch.randn(7, 2, 16)
loss = layer(src).pow(2).mean()
loss.backward()
optimizer.step()
assert layer.self_attn.in_proj_weight.grad is not None
