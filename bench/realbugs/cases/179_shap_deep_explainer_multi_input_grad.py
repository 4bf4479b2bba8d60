# Source: https://github.com/shap/shap/pull/684
# Category: backward-twice
# Expect: raises RuntimeError: Trying to backward through the graph a second time
"""SHAP's PyTorch DeepExplainer computes, for a model with several inputs, the gradient of the selected output
with respect to each input in turn with torch.autograd.grad. The first call frees the graph, so the second input's
call fails; the PR passes retain_graph=True for every input but the last."""
import numpy as np
import torch
import torch.nn as nn

torch.manual_seed(0)


class TwoInputNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 8)
        self.b = nn.Linear(3, 8)
        self.out = nn.Linear(8, 2)

    def forward(self, x1, x2):
        return self.out(torch.relu(self.a(x1) + self.b(x2)))


class PyTorchDeep:
    def __init__(self, model, data):
        self.model = model.eval()
        self.data = data

    def gradient(self, idx, inputs):
        self.model.zero_grad()
        X = [x.requires_grad_() for x in inputs]
        outputs = self.model(*X)
        selected = [val for val in outputs[:, idx]]
        grads = []
        for x in X:
            grad = torch.autograd.grad(selected, x)[0]  # BUG: backward-twice
            grads.append(grad.cpu().numpy())
        return grads

    def shap_values(self, X):
        phis = []
        for output_idx in range(2):
            grads = self.gradient(output_idx, [x.clone() for x in X])
            phis.append([g * (x - d.mean(0)).numpy() for g, x, d in zip(grads, X, self.data)])
        return phis


background = [torch.randn(10, 4), torch.randn(10, 3)]
explainer = PyTorchDeep(TwoInputNet(), background)
shap_values = explainer.shap_values([torch.randn(2, 4), torch.randn(2, 3)])
print("attributions per output and input:", [[np.asarray(v).shape for v in out] for out in shap_values])
