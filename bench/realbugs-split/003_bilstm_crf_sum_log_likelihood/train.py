# Source: https://github.com/pytorch/pytorch/issues/1840
# Category: graph-kept-alive
# Expect: silent: the epoch total is a tensor that keeps every sentence's CRF graph alive (memory grows until OOM)
"""The BiLSTM-CRF tutorial moved to the GPU: each sentence's negative log likelihood is added to a
running `sum_log_likelihood` tensor for logging, which chains and keeps all their graphs alive."""
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
        sum_log_likelihood += neg_log_likelihood  # BUG: graph-kept-alive
        neg_log_likelihood.backward()
        optimizer.step()
    print("epoch", epoch, "total nll", float(sum_log_likelihood))

assert isinstance(sum_log_likelihood, torch.Tensor) and sum_log_likelihood.grad_fn is not None
assert sum_log_likelihood.requires_grad
print("EVIDENCE: sum_log_likelihood still carries grad_fn", type(sum_log_likelihood.grad_fn).__name__,
      "chaining", len(training_data), "sentence graphs")
