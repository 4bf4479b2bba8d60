# Source: https://github.com/sicara/easy-few-shot-learning/pull/129
# Category: state-dict-alias
# Expect: silent: best_state is the live state_dict (tensors sharing the parameters' storage), so it follows every later episode's update and "restoring the best model" after training restores the last weights
"""easy-few-shot-learning's episodic-training notebook keeps the Prototypical Network with the best validation
accuracy as `best_state = few_shot_classifier.state_dict()` and loads it back after the last epoch; state_dict()
returns references to the parameters, so best_state is never the best epoch's weights. The fix deep-copies it."""
import copy

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class PrototypicalNetworks(nn.Module):
    def __init__(self, backbone):
        super().__init__()
        self.backbone = backbone

    def process_support_set(self, support_images, support_labels):
        z = self.backbone(support_images)
        self.prototypes = torch.stack([z[support_labels == c].mean(0) for c in support_labels.unique()])

    def forward(self, query_images):
        return -torch.cdist(self.backbone(query_images), self.prototypes)


def sample_episode(n_way=3, n_shot=2, n_query=4):
    centers = torch.randn(n_way, 10) * 2
    support_labels = torch.arange(n_way).repeat_interleave(n_shot)
    query_labels = torch.arange(n_way).repeat_interleave(n_query)
    return (centers[support_labels] + torch.randn(len(support_labels), 10), support_labels,
            centers[query_labels] + torch.randn(len(query_labels), 10), query_labels)


def training_epoch(model, optimizer, n_episodes=5):
    for _ in range(n_episodes):
        support_images, support_labels, query_images, query_labels = sample_episode()
        optimizer.zero_grad()
        model.process_support_set(support_images, support_labels)
        loss = F.cross_entropy(model(query_images), query_labels)
        loss.backward()
        optimizer.step()


def evaluate(model, n_episodes=5):
    torch.manual_seed(123)
    correct = total = 0
    with torch.no_grad():
        for _ in range(n_episodes):
            support_images, support_labels, query_images, query_labels = sample_episode()
            model.process_support_set(support_images, support_labels)
            correct += (model(query_images).argmax(1) == query_labels).sum().item()
            total += len(query_labels)
    return correct / total


few_shot_classifier = PrototypicalNetworks(nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 16)))
train_optimizer = torch.optim.SGD(few_shot_classifier.parameters(), lr=0.5)
best_state, best_validation_accuracy, best_snapshot = few_shot_classifier.state_dict(), 0.0, None
for epoch in range(6):
    torch.manual_seed(epoch)
    training_epoch(few_shot_classifier, train_optimizer)
    validation_accuracy = evaluate(few_shot_classifier)
    if validation_accuracy > best_validation_accuracy:
        best_validation_accuracy = validation_accuracy
        best_state = few_shot_classifier.state_dict()  # BUG: state-dict-alias
        best_snapshot = copy.deepcopy(few_shot_classifier.state_dict())
few_shot_classifier.load_state_dict(best_state)
restored = few_shot_classifier.state_dict()
same_as_best = all(torch.equal(restored[k], best_snapshot[k]) for k in restored)
print("restored weights equal the best epoch's weights:", same_as_best)
assert not same_as_best
print("EVIDENCE: load_state_dict(best_state) restored the last epoch's weights, not the best epoch's")
