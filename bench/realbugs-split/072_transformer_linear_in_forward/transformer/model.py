"""The toy translation data and the Transformer built from the layers."""
import torch
import torch.nn as nn

from .layers import *

sentences = ['ich mochte ein bier P', 'S i want a beer', 'i want a beer E']
src_vocab = {w: i for i, w in enumerate(sentences[0].split())}
tgt_words = sorted(set((sentences[1] + ' ' + sentences[2]).split()))
tgt_vocab = {w: i for i, w in enumerate(tgt_words)}
src_vocab_size, tgt_vocab_size = len(src_vocab), len(tgt_vocab)


def make_batch(sentences):
    input_batch = [[src_vocab[n] for n in sentences[0].split()]]
    output_batch = [[tgt_vocab[n] for n in sentences[1].split()]]
    target_batch = [[tgt_vocab[n] for n in sentences[2].split()]]
    return torch.LongTensor(input_batch), torch.LongTensor(output_batch), torch.LongTensor(target_batch)


def get_attn_pad_mask(seq_q, seq_k):
    batch_size, len_q = seq_q.size()
    batch_size, len_k = seq_k.size()
    return seq_k.eq(src_vocab['P']).unsqueeze(1).expand(batch_size, len_q, len_k)


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
