# Source: https://github.com/wenet-e2e/wekws/issues/72
# Category: missing-zero-grad
# Expect: ok
"""The keyword-spotting Executor after the merged fix: optimizer.zero_grad() right above loss.backward(), so each
step uses only the current batch's (clipped) gradient."""
import torch

from wekws.executor import Executor
from wekws.model import KWSModel

torch.manual_seed(0)
device = torch.device("cpu")

data_loader = []
for b in range(5):
    lengths = torch.randint(6, 12, (4,))
    data_loader.append(([f"utt{b}_{i}" for i in range(4)], torch.randn(4, 12, 10), torch.randint(0, 3, (4,)), lengths))

model = KWSModel()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

# instrumentation: the gradient of the current batch alone (leaf tensor hooks run before accumulation into .grad)
fresh = {}
for p in model.parameters():
    p.register_hook(lambda g, p=p: fresh.__setitem__(p, g.clone()))
stale = []
optimizer.register_step_pre_hook(lambda opt, a, k: stale.append(
    max((p.grad - fresh[p]).abs().max().item() for p in model.parameters())))

executor = Executor()
executor.train(model, optimizer, data_loader, device, None, {'grad_clip': 50.0, 'epoch': 0})
print("max |p.grad - this batch's gradient| at each step:", [f"{d:.2e}" for d in stale])
assert len(stale) == len(data_loader) and max(stale) < 1e-7
