# Source: https://discuss.pytorch.org/t/when-would-the-error-one-of-the-variables-needed-for-gradient-computation-has-been-modified-occur/11976/2
# Category: inplace-on-saved
# Expect: raises RuntimeError: one of the variables needed for gradient computation has been modified by an inplace operation
"""A two-branch conv block feeds the main-branch activation into a side conv and then does
`x += shortcut` on it; the side conv saved x for its weight gradient, so backward fails."""
import torch
import torch.nn as nn

torch.manual_seed(0)


class TwoBranchBlock(nn.Module):
    def __init__(self, channels=4):
        super().__init__()
        self.conv1 = nn.Conv2d(3, channels, 3, padding=1)
        self.conv1_p = nn.Conv2d(channels, channels, 1)  # side branch
        self.shortcut = nn.Conv2d(3, channels, 1)
        self.head = nn.Linear(channels * 2, 2)

    def forward(self, input):
        x = self.conv1(input)            # main branch
        x_p = self.conv1_p(x)            # another branch reads x
        x += self.shortcut(input)        # BUG: inplace-on-saved
        feats = torch.cat([x.mean((2, 3)), x_p.mean((2, 3))], dim=1)
        return self.head(feats)


model = TwoBranchBlock()
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

images = torch.randn(8, 3, 6, 6)
labels = torch.randint(0, 2, (8,))
for step in range(2):
    optimizer.zero_grad()
    loss = criterion(model(images), labels)
    loss.backward()
    optimizer.step()
print("trained")
