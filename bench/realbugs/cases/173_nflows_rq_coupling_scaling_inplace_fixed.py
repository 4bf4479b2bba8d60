# Source: https://github.com/bayesiains/nflows/issues/89
# Category: inplace-on-saved
# Expect: ok
"""Fixed twin: the widths and heights are scaled out of place (the reporter's fix).
nflows' rational-quadratic coupling slices the transform net's output into unnormalized widths, heights and
derivatives and, when the net has `hidden_features`, scales the widths and heights in place
(`unnormalized_widths /= np.sqrt(hidden_features)`). The slices are views of the net's output; with the
reporter's net that output comes out of a ReLU, which saved it for backward. The reporter replaced the two lines
with out-of-place divisions."""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class TransformNet(nn.Module):
    def __init__(self, in_features, out_features, hidden_features=32):
        super().__init__()
        self.hidden_features = hidden_features
        self.net = nn.Sequential(nn.Linear(in_features, hidden_features), nn.ReLU(),
                                 nn.Linear(hidden_features, out_features), nn.ReLU())

    def forward(self, x):
        return self.net(x)


class PiecewiseRationalQuadraticCouplingTransform(nn.Module):
    def __init__(self, features=4, num_bins=8):
        super().__init__()
        self.num_bins = num_bins
        self.half = features // 2
        self.transform_net = TransformNet(self.half, (features - self.half) * (3 * num_bins - 1))

    def _piecewise_cdf(self, inputs, transform_params):
        b, d = inputs.shape
        transform_params = transform_params.view(b, d, 3 * self.num_bins - 1)
        unnormalized_widths = transform_params[..., :self.num_bins]
        unnormalized_heights = transform_params[..., self.num_bins:2 * self.num_bins]
        unnormalized_derivatives = transform_params[..., 2 * self.num_bins:]
        if hasattr(self.transform_net, "hidden_features"):
            unnormalized_widths = unnormalized_widths / np.sqrt(self.transform_net.hidden_features)
            unnormalized_heights = unnormalized_heights / np.sqrt(self.transform_net.hidden_features)
        widths = F.softmax(unnormalized_widths, dim=-1)
        heights = F.softmax(unnormalized_heights, dim=-1)
        derivatives = F.softplus(unnormalized_derivatives)
        x = torch.sigmoid(inputs).unsqueeze(-1)
        outputs = (heights * torch.cumsum(widths, -1).clamp(max=1) * x).sum(-1)
        logabsdet = torch.log((derivatives.mean(-1) + 1e-3)).sum(-1)
        return outputs, logabsdet

    def forward(self, inputs):
        identity, transform = inputs[:, :self.half], inputs[:, self.half:]
        params = self.transform_net(identity)
        out, logabsdet = self._piecewise_cdf(transform, params)
        return torch.cat([identity, out], 1), logabsdet


flow = PiecewiseRationalQuadraticCouplingTransform()
optimizer = torch.optim.Adam(flow.parameters(), lr=1e-3)
x = torch.randn(16, 4)
z, logabsdet = flow(x)
loss = (0.5 * z.pow(2).sum(1) - logabsdet).mean()
loss.backward()
optimizer.step()
assert flow.transform_net.net[0].weight.grad is not None
