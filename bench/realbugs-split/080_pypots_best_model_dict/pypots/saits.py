"""Imputation networks."""
import torch
import torch.nn as nn


class _SAITSLike(nn.Module):
    """Tiny masked-reconstruction imputer standing in for the real network."""

    def __init__(self, n_features, d_model):
        super().__init__()
        self.embedding = nn.Linear(n_features * 2, d_model)
        self.reduce_dim = nn.Linear(d_model, n_features)

    def forward(self, inputs):
        X, missing_mask = inputs["X"], inputs["missing_mask"]
        hidden = torch.relu(self.embedding(torch.cat([X * missing_mask, missing_mask], dim=-1)))
        reconstruction = self.reduce_dim(hidden)
        imputed_data = missing_mask * X + (1 - missing_mask) * reconstruction
        loss = (((reconstruction - X) ** 2) * missing_mask).sum() / missing_mask.sum()
        return {"imputed_data": imputed_data, "loss": loss}
