# Source: https://discuss.pytorch.org/t/cuda-out-of-memory-error-understanding-how-pytorch-stores-class-variable/13778
# Category: graph-kept-alive
# Expect: silent: every cached block output keeps its whole autograd graph alive, so memory grows with the dataset until OOM
"""A DenseNet bottleneck caches its output per batch in a class-level list so it can be
replayed once the layer is frozen; the cached tensors are stored with their graphs attached."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class DenseNet:
    freezeLayerIndex = 2


class Bottleneck(nn.Module):
    out_saved = [0] * 8

    def __init__(self, nChannels, growthRate, layer_index, train_size, batch_sz):
        super(Bottleneck, self).__init__()
        interChannels = 4 * growthRate
        self.bn1 = nn.BatchNorm2d(nChannels)
        self.conv1 = nn.Conv2d(nChannels, interChannels, kernel_size=1, bias=False)
        self.bn2 = nn.BatchNorm2d(interChannels)
        self.conv2 = nn.Conv2d(interChannels, growthRate, kernel_size=3, padding=1, bias=False)
        self.active = True
        self.layer_index = layer_index
        self.counter = 0
        self.maxCounter = -(-train_size // batch_sz)

    def forward(self, x):
        if self.active:
            out = self.conv1(F.relu(self.bn1(x)))
            out = self.conv2(F.relu(self.bn2(out)))
            out = torch.cat((x, out), 1)
            if self.layer_index < DenseNet.freezeLayerIndex:
                Bottleneck.out_saved[self.counter] = out  # BUG: graph-kept-alive
                self.counter += 1
                if self.counter >= self.maxCounter:
                    self.counter = 0
                    self.active = False
            return out
        detach = Bottleneck.out_saved[self.counter].detach()
        self.counter += 1
        if self.counter >= self.maxCounter:
            self.counter = 0
        return detach


train_size, batch_sz = 32, 8
block = Bottleneck(nChannels=3, growthRate=4, layer_index=0, train_size=train_size, batch_sz=batch_sz)
head = nn.Linear(7 * 6 * 6, 2)
optimizer = torch.optim.SGD(list(block.parameters()) + list(head.parameters()), lr=0.01)

data = [(torch.randn(batch_sz, 3, 6, 6), torch.randint(0, 2, (batch_sz,))) for _ in range(train_size // batch_sz)]
for images, labels in data:
    optimizer.zero_grad()
    out = block(images)
    loss = F.cross_entropy(head(out.flatten(1)), labels)
    loss.backward()
    optimizer.step()

cached = [t for t in Bottleneck.out_saved if isinstance(t, torch.Tensor)]
still_attached = [t for t in cached if t.grad_fn is not None]
assert len(still_attached) == len(data)
print("EVIDENCE:", len(still_attached), "cached block outputs still hold their autograd graphs (grad_fn", type(still_attached[0].grad_fn).__name__ + ")")
