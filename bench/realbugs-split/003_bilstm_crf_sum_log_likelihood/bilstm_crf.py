"""The BiLSTM-CRF tagger: LSTM features plus a CRF layer scored in log space."""
import torch
import torch.nn as nn

START_TAG, STOP_TAG = "<START>", "<STOP>"


class BiLSTM_CRF(nn.Module):
    def __init__(self, vocab_size, tag_to_ix, embedding_dim, hidden_dim):
        super().__init__()
        self.tag_to_ix = tag_to_ix
        self.tagset_size = len(tag_to_ix)
        self.word_embeds = nn.Embedding(vocab_size, embedding_dim)
        self.lstm = nn.LSTM(embedding_dim, hidden_dim // 2, bidirectional=True)
        self.hidden2tag = nn.Linear(hidden_dim, self.tagset_size)
        self.transitions = nn.Parameter(torch.randn(self.tagset_size, self.tagset_size))
        with torch.no_grad():
            self.transitions[tag_to_ix[START_TAG], :] = -10000
            self.transitions[:, tag_to_ix[STOP_TAG]] = -10000

    def _get_lstm_features(self, sentence):
        embeds = self.word_embeds(sentence).view(len(sentence), 1, -1)
        lstm_out, _ = self.lstm(embeds)
        return self.hidden2tag(lstm_out.view(len(sentence), -1))

    def _forward_alg(self, feats):
        forward_var = torch.full((self.tagset_size,), -10000.0, device=feats.device)
        forward_var[self.tag_to_ix[START_TAG]] = 0.0
        for feat in feats:
            scores = forward_var.unsqueeze(0) + self.transitions + feat.unsqueeze(1)
            forward_var = torch.logsumexp(scores, dim=1)
        terminal_var = forward_var + self.transitions[self.tag_to_ix[STOP_TAG]]
        return torch.logsumexp(terminal_var, dim=0)

    def _score_sentence(self, feats, tags):
        tags = torch.cat([torch.tensor([self.tag_to_ix[START_TAG]], device=feats.device), tags])
        score = torch.zeros((), device=feats.device)
        for i, feat in enumerate(feats):
            score = score + self.transitions[tags[i + 1], tags[i]] + feat[tags[i + 1]]
        return score + self.transitions[self.tag_to_ix[STOP_TAG], tags[-1]]

    def neg_log_likelihood(self, sentence, tags):
        feats = self._get_lstm_features(sentence)
        return self._forward_alg(feats) - self._score_sentence(feats, tags)
