# Source: https://github.com/pytorch/pytorch/issues/1840
# Category: graph-kept-alive
# Expect: ok
"""The BiLSTM-CRF training loop with the maintainers' fix: only the Python number of each sentence's
negative log likelihood is added to the running total, so no graph outlives its step."""
import torch

from bilstm_crf import START_TAG, STOP_TAG, BiLSTM_CRF

torch.manual_seed(0)
device = torch.device("cpu")

tag_to_ix = {"B": 0, "I": 1, "O": 2, START_TAG: 3, STOP_TAG: 4}
training_data = [(torch.randint(0, 20, (6,)), torch.randint(0, 3, (6,))) for _ in range(8)]

model = BiLSTM_CRF(20, tag_to_ix, embedding_dim=5, hidden_dim=4).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01, weight_decay=1e-4)

for epoch in range(2):
    sum_log_likelihood = 0
    for sentence, tags in training_data:
        model.zero_grad()
        sentence_in, targets = sentence.to(device), tags.to(device)
        neg_log_likelihood = model.neg_log_likelihood(sentence_in, targets)
        sum_log_likelihood += neg_log_likelihood.item()
        neg_log_likelihood.backward()
        optimizer.step()
    print("epoch", epoch, "total nll", float(sum_log_likelihood))

assert isinstance(sum_log_likelihood, float) and sum_log_likelihood > 0
print("epoch total is a plain float:", sum_log_likelihood)
