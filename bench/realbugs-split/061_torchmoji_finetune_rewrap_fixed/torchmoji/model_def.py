"""The torchMoji network: embeddings, two BiLSTMs and an attention layer."""
import torch
import torch.nn as nn
from torch.autograd import Variable


class Attention(nn.Module):
    def __init__(self, attention_size):
        super().__init__()
        self.attention_vector = nn.Parameter(torch.randn(attention_size) * 0.05)

    def forward(self, inputs):
        logits = inputs.matmul(self.attention_vector)
        weights = torch.softmax(logits, dim=1)
        return (inputs * weights.unsqueeze(-1)).sum(dim=1), weights


class TorchMoji(nn.Module):
    def __init__(self, nb_classes, nb_tokens, embedding_dim=16, hidden_size=8):
        super().__init__()
        self.embed = nn.Embedding(nb_tokens, embedding_dim)
        self.embed_dropout = nn.Dropout(0.0)
        self.lstm_0 = nn.LSTM(embedding_dim, hidden_size, batch_first=True, bidirectional=True)
        self.lstm_1 = nn.LSTM(hidden_size * 2, hidden_size, batch_first=True, bidirectional=True)
        attention_size = 4 * hidden_size + embedding_dim
        self.attention_layer = Attention(attention_size)
        self.final_dropout = nn.Dropout(0.0)
        self.output_layer = nn.Sequential(nn.Linear(attention_size, nb_classes if nb_classes > 2 else 1))

    def forward(self, input_seqs):
        # remember the input format so the output can be returned in the same format
        return_numpy = False
        return_tensor = False
        if isinstance(input_seqs, torch.Tensor):
            input_seqs = Variable(input_seqs)
            return_tensor = True
        else:
            input_seqs = torch.from_numpy(input_seqs.astype('int64'))
            return_numpy = True

        x = torch.tanh(self.embed(input_seqs))
        x = self.embed_dropout(x)
        lstm_0_output, _ = self.lstm_0(x)
        lstm_1_output, _ = self.lstm_1(lstm_0_output)
        x = torch.cat((lstm_1_output, lstm_0_output, x), dim=2)
        x, att_weights = self.attention_layer(x)
        outputs = self.output_layer(self.final_dropout(x))

        # tensor inputs get the output with its graph; only NumPy callers get a detached copy
        if return_numpy:
            outputs = outputs.detach().numpy()
        return outputs
