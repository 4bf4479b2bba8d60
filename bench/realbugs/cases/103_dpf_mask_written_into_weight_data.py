# Source: https://github.com/INCHEON-CHO/Dynamic_Model_Pruning_with_Feedback/issues/1
# Category: inplace-through-data
# Expect: silent: weight.data is overwritten with weight*mask every forward, so the dense weights at pruned positions are destroyed and can never be revived by the feedback updates
"""A Dynamic-Pruning-with-Feedback ResNet masks its convolutions by assigning
`conv.weight.data = weight * mask` in forward; a user noticed this permanently zeroes the pruned dense
weights, while DPF needs them kept and updated (the author agreed and moved to a masking autograd Function)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, in_planes, planes, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, kernel_size=3, stride=stride, padding=1, bias=False)
        self.mask1 = nn.Conv2d(in_planes, planes, kernel_size=3, stride=stride, padding=1, bias=False)
        self.mask1.weight.data = torch.ones(self.mask1.weight.size())
        self.bn1 = nn.BatchNorm2d(planes)

        self.conv2 = nn.Conv2d(planes, planes, kernel_size=3, stride=1, padding=1, bias=False)
        self.mask2 = nn.Conv2d(planes, planes, kernel_size=3, stride=1, padding=1, bias=False)
        self.mask2.weight.data = torch.ones(self.mask2.weight.size())
        self.bn2 = nn.BatchNorm2d(planes)

    def forward(self, x):
        self.conv1.weight.data = torch.mul(self.conv1.weight, self.mask1.weight)  # BUG: inplace-through-data
        self.conv2.weight.data = torch.mul(self.conv2.weight, self.mask2.weight)  # BUG: inplace-through-data

        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out += x
        return F.relu(out)

    def __prune__(self, threshold):
        self.mask1.weight.data = torch.gt(torch.abs(self.conv1.weight), threshold).float()
        self.mask2.weight.data = torch.gt(torch.abs(self.conv2.weight), threshold).float()


class ResNet(nn.Module):
    def __init__(self, block, num_blocks, num_classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, kernel_size=3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.layer1 = nn.Sequential(*[block(8, 8) for _ in range(num_blocks)])
        self.linear = nn.Linear(8, num_classes)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.layer1(out)
        out = F.avg_pool2d(out, out.size(3))
        return self.linear(out.view(out.size(0), -1))

    def __prune__(self, threshold):
        for sub_block in self.layer1:
            sub_block.__prune__(threshold)


def get_threshold(model, rate):
    weights = torch.cat([b.conv1.weight.detach().abs().flatten() for b in model.layer1]
                        + [b.conv2.weight.detach().abs().flatten() for b in model.layer1])
    return torch.quantile(weights, rate).item()


model = ResNet(BasicBlock, 2)
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

block = model.layer1[0]
for i in range(12):
    if i % 4 == 0:  # dynamic re-pruning every few iterations
        model.__prune__(get_threshold(model, 0.5))
        pruned = block.mask1.weight.detach() == 0
    images, labels = torch.randn(4, 3, 8, 8), torch.randint(0, 10, (4,))
    optimizer.zero_grad()
    loss = criterion(model(images), labels)
    loss.backward()
    optimizer.step()

# DPF keeps a dense copy: pruned weights still get the gradient of the pruned model and may come back
model(torch.randn(1, 3, 8, 8))
dense = block.conv1.weight.detach()
assert torch.all(dense[pruned] == 0)
print("EVIDENCE: all %d pruned entries of the dense conv1 weight are exactly 0 - their feedback updates were wiped" % int(pruned.sum()))
