# Source: https://github.com/huggingface/diffusers/issues/1009
# Category: frozen-by-zeroed-grad
# Expect: silent: the "frozen" token embeddings are kept frozen only by zeroing their gradient rows, but AdamW's weight decay still shrinks them at every step, so the pretrained vocabulary drifts
"""Textual inversion trains one new token embedding: the script hands the whole input-embedding matrix to AdamW
(weight_decay=1e-2) and, after backward, zeroes the gradient of every row except the placeholder token. A zero
gradient does not stop AdamW's decoupled weight decay, so all other embeddings decay; the reported fix restores
the original rows after each step."""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class CLIPTextModel(nn.Module):
    def __init__(self, vocab=20, dim=8):
        super().__init__()
        self.token_embedding = nn.Embedding(vocab, dim)
        self.encoder = nn.Linear(dim, dim)

    def get_input_embeddings(self):
        return self.token_embedding

    def resize_token_embeddings(self, n):
        old = self.token_embedding
        self.token_embedding = nn.Embedding(n, old.embedding_dim)
        self.token_embedding.weight.data[:old.num_embeddings] = old.weight.data

    def forward(self, input_ids):
        return self.encoder(self.token_embedding(input_ids))


def freeze_params(params):
    for param in params:
        param.requires_grad = False


args = argparse.Namespace(learning_rate=5e-3, adam_weight_decay=1e-2, max_train_steps=5)
text_encoder, unet = CLIPTextModel(), nn.Linear(8, 8)
text_encoder.resize_token_embeddings(21)
placeholder_token_id, initializer_token_id = 20, 3
token_embeds = text_encoder.get_input_embeddings().weight.data
token_embeds[placeholder_token_id] = token_embeds[initializer_token_id]
freeze_params(unet.parameters())
freeze_params(text_encoder.encoder.parameters())
orig_embeds_params = text_encoder.get_input_embeddings().weight.data.clone()

optimizer = torch.optim.AdamW(text_encoder.get_input_embeddings().parameters(), lr=args.learning_rate,
                              weight_decay=args.adam_weight_decay)
for step in range(args.max_train_steps):
    input_ids = torch.tensor([[1, placeholder_token_id, 5, 7]])
    encoder_hidden_states = text_encoder(input_ids)
    noise = torch.randn(1, 4, 8)
    noise_pred = unet(encoder_hidden_states + noise)
    loss = F.mse_loss(noise_pred, noise)
    loss.backward()
    grads = text_encoder.get_input_embeddings().weight.grad
    index_grads_to_zero = torch.arange(21) != placeholder_token_id
    grads.data[index_grads_to_zero, :] = grads.data[index_grads_to_zero, :].fill_(0)  # BUG: frozen-by-zeroed-grad
    optimizer.step()
    optimizer.zero_grad()

weight = text_encoder.get_input_embeddings().weight.data
drift = (weight[index_grads_to_zero] - orig_embeds_params[index_grads_to_zero]).abs().max().item()
print("largest change of a 'frozen' pretrained embedding:", drift)
assert drift > 0
print("EVIDENCE: pretrained token embeddings changed by up to", f"{drift:.2e}", "although their gradients were zeroed")
