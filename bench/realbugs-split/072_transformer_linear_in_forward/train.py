# Source: https://github.com/graykode/nlp-tutorial/issues/29
# Category: module-in-forward
# Expect: silent: the attention output projection (and its LayerNorm) are constructed inside forward(), so they are re-initialised on every call and never trained
"""A popular Transformer tutorial builds the multi-head attention output projection as
`nn.Linear(n_heads * d_v, d_model)(context)` inside forward(); the issue points out this layer is never trained."""
import torch
import torch.nn as nn
import torch.optim as optim

from transformer.model import Transformer, make_batch, sentences

torch.manual_seed(0)

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
assert len(list(model.dec_enc_attn.parameters())) == 6  # only W_Q, W_K, W_V
assert not torch.equal(out1, out2)
print("EVIDENCE: the attention block registers only W_Q/W_K/W_V and two eval forwards on the same input disagree by", round((out1 - out2).abs().max().item(), 3))
