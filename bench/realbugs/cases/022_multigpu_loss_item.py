# Source: https://discuss.pytorch.org/t/grad-is-none-autograd-through-list-of-variables-multigpu-transformer/26372
# Category: scalar-roundtrip
# Expect: raises RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn
"""Porting the Annotated Transformer's chunked multi-GPU loss to a newer PyTorch, the reporter turned
`l.sum()[0]` into `l.sum().item()`, so the chunk loss is a constant and never reaches out_column."""
import torch
import torch.nn as nn
from torch.autograd import Variable

torch.manual_seed(0)
device = torch.device("cpu")


class MultiGPULossCompute:
    "A multi-gpu loss compute and train function (one device here)."

    def __init__(self, generator, criterion, devices, opt=None, chunk_size=5):
        self.generator = generator
        self.criterion = criterion
        self.opt = opt
        self.devices = devices
        self.chunk_size = chunk_size

    def __call__(self, out, targets, normalize):
        total = 0.0
        out_scatter = [out]              # nn.parallel.scatter on a single device
        out_grad = [[] for _ in out_scatter]
        targets = [targets]

        chunk_size = self.chunk_size
        for i in range(0, out_scatter[0].size(1), chunk_size):
            # Predict distributions on a detached column so the generator's graph stays small
            out_column = [[Variable(o[:, i:i + chunk_size].data,
                                    requires_grad=self.opt is not None)]
                          for o in out_scatter]
            gen = [self.generator(*col) for col in out_column]

            y = [(g.contiguous().view(-1, g.size(-1)),
                  t[:, i:i + chunk_size].contiguous().view(-1))
                 for g, t in zip(gen, targets)]
            loss = [self.criterion(*pair) for pair in y]

            # Sum and normalize loss
            l = torch.stack(loss)
            l = l.sum().item() / normalize.float()  # BUG: scalar-roundtrip
            total += l.item()

            # Backprop loss to output of transformer
            if self.opt is not None:
                l.backward()
                for j, l in enumerate(loss):
                    out_grad[j].append(out_column[j][0].grad.data.clone())

        # Backprop all loss through transformer.
        if self.opt is not None:
            out_grad = [torch.cat(og, dim=1) for og in out_grad]
            out.backward(gradient=out_grad[0])
            self.opt.step()
            self.opt.zero_grad()
        return total * normalize


class TinyEncoder(nn.Module):
    def __init__(self, vocab, d_model):
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        self.proj = nn.Linear(d_model, d_model)

    def forward(self, src):
        return torch.tanh(self.proj(self.embed(src)))


vocab, d_model = 11, 8
model = TinyEncoder(vocab, d_model).to(device)
generator = nn.Linear(d_model, vocab).to(device)
criterion = nn.CrossEntropyLoss(reduction="sum")
opt = torch.optim.Adam(list(model.parameters()) + list(generator.parameters()), lr=1e-2)
loss_compute = MultiGPULossCompute(generator, criterion, devices=[0], opt=opt, chunk_size=5)

for epoch in range(2):
    src = torch.randint(0, vocab, (4, 12), device=device)
    tgt = src.flip(1)
    ntokens = torch.tensor(tgt.numel())
    out = model(src)
    total = loss_compute(out, tgt, ntokens)
    print(epoch, float(total))
