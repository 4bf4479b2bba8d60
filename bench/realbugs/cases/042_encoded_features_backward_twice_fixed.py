# Source: https://devgem.io/posts/understanding-pytorch-s-runtimeerror-backward-through-the-graph-a-second-time
# Category: backward-twice
# Expect: ok
"""Fixed twin: the frozen autoencoder encodes the features under torch.no_grad(), so each
classifier batch builds and frees only its own graph."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class AutoEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(20, 8), nn.Tanh())
        self.decoder = nn.Linear(8, 20)

    def forward(self, x):
        encoded = self.encoder(x)
        decoded = self.decoder(encoded)
        return encoded, F.mse_loss(decoded, x)


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 3)

    def forward(self, x, y):
        out = self.fc(x)
        loss = F.cross_entropy(out, y)
        accuracy = (out.argmax(1) == y).float().mean()
        return out, loss, accuracy


X_train_tensor = torch.randn(64, 20)
y_train_tensor = torch.randint(0, 3, (64,))

autoencoder = AutoEncoder()
autoencoder.eval()
with torch.no_grad():
    X_train_encoded, ae_loss = autoencoder(X_train_tensor)

model = Classifier()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
batch_size = 16
max_iters = 2

for iter in range(max_iters):
    start_ix = 0
    while start_ix < len(X_train_encoded):
        end_ix = min(start_ix + batch_size, len(X_train_encoded))
        out, loss, accuracy = model(X_train_encoded[start_ix:end_ix], y_train_tensor[start_ix:end_ix])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        start_ix = end_ix
    print(iter, loss.item(), accuracy.item())

assert X_train_encoded.grad_fn is None
assert model.fc.weight.grad is not None
print("classifier trained on detached features")
