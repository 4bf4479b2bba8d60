"""Correct training code that a runtime monitor could mistake for misuse: each idiom runs under
the monitor (default and deep) and must produce no finding at all. These are the shapes real
projects use (adversarial attacks, saliency maps, target networks, EMA, gradient accumulation,
GANs, truncated BPTT, gradient penalties, frozen backbones, custom Functions done right)."""

from __future__ import annotations

import copy
import warnings

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional

from gradlint.runtime import monitor  # noqa: E402


def _mlp(i=4, h=8, o=2):
    return nn.Sequential(nn.Linear(i, h), nn.ReLU(), nn.Linear(h, o))


def pgd_attack():
    torch.manual_seed(0)
    model = _mlp()
    x, y = torch.randn(6, 4), torch.randint(0, 2, (6,))
    x_adv = x.clone().detach()
    for _ in range(4):
        x_adv.requires_grad_(True)
        loss = F.cross_entropy(model(x_adv), y)
        (grad,) = torch.autograd.grad(loss, [x_adv])
        x_adv = x_adv.detach() + 0.05 * grad.sign()
        x_adv = torch.min(torch.max(x_adv, x - 0.1), x + 0.1).clamp(-3, 3)
    return x_adv


def attack_on_a_graph_tensor_through_autograd_grad():
    torch.manual_seed(0)
    encoder, head = _mlp(4, 8, 4), _mlp(4, 8, 2)
    y = torch.randint(0, 2, (6,))
    z = encoder(torch.randn(6, 4))  # a graph tensor: the attack cuts it on purpose
    for _ in range(3):
        z = z.detach().requires_grad_()
        loss = F.cross_entropy(head(z), y)
        (g,) = torch.autograd.grad(loss, z)
        z = z + 0.1 * g.sign()
    return z.detach()


def fgsm_with_backward():
    torch.manual_seed(0)
    model = _mlp()
    x, y = torch.randn(6, 4), torch.randint(0, 2, (6,))
    x = x.detach().requires_grad_()
    F.cross_entropy(model(x), y).backward()
    return (x + 0.1 * x.grad.sign()).detach()


def saliency_map():
    torch.manual_seed(0)
    model = _mlp().eval()
    x = torch.randn(1, 4, requires_grad=True)
    out = model(x)
    out[0, out.argmax()].backward()
    return x.grad.abs()


def dqn_target_network():
    torch.manual_seed(0)
    online = _mlp()
    target = copy.deepcopy(online)
    opt = torch.optim.Adam(online.parameters(), lr=1e-3)
    for step in range(6):
        s, a, r, s2 = torch.randn(5, 4), torch.randint(0, 2, (5,)), torch.randn(5), torch.randn(5, 4)
        q = online(s).gather(1, a[:, None]).squeeze(1)
        with torch.no_grad():
            tq = r + 0.99 * target(s2).max(1).values
        loss = F.smooth_l1_loss(q, tq)
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(online.parameters(), 1.0)
        opt.step()
        if step % 2 == 0:
            target.load_state_dict(online.state_dict())
        with torch.no_grad():  # soft update
            for tp, p in zip(target.parameters(), online.parameters()):
                tp.data.mul_(0.9).add_(0.1 * p.data)
    return loss.item()


def ema_of_weights():
    torch.manual_seed(0)
    model = _mlp()
    ema = copy.deepcopy(model).requires_grad_(False)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(4):
        opt.zero_grad()
        model(torch.randn(3, 4)).pow(2).mean().backward()
        opt.step()
        with torch.no_grad():
            for e, p in zip(ema.parameters(), model.parameters()):
                e.mul_(0.99).add_(p.detach(), alpha=0.01)
    return ema[0].weight.sum().item()


def gradient_accumulation():
    torch.manual_seed(0)
    model = _mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    opt.zero_grad()
    for i in range(8):
        loss = model(torch.randn(3, 4)).pow(2).mean() / 4
        loss.backward()
        losses.append(loss.item())
        if (i + 1) % 4 == 0:
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)
    return sum(losses)


def gan_with_detach():
    torch.manual_seed(0)
    gen, disc = _mlp(2, 8, 4), _mlp(4, 8, 1)
    opt_g = torch.optim.Adam(gen.parameters(), lr=1e-3)
    opt_d = torch.optim.Adam(disc.parameters(), lr=1e-3)
    for _ in range(3):
        real, z = torch.randn(5, 4), torch.randn(5, 2)
        fake = gen(z)
        opt_d.zero_grad()
        loss_d = (F.softplus(-disc(real)) + F.softplus(disc(fake.detach()))).mean()
        loss_d.backward()
        opt_d.step()
        opt_g.zero_grad()
        loss_g = F.softplus(-disc(fake)).mean()
        loss_g.backward()
        opt_g.step()
    return loss_g.item()


def wgan_gradient_penalty():
    torch.manual_seed(0)
    disc = _mlp(4, 8, 1)
    opt = torch.optim.Adam(disc.parameters(), lr=1e-3)
    for _ in range(3):
        real, fake = torch.randn(5, 4), torch.randn(5, 4)
        eps = torch.rand(5, 1)
        mix = (eps * real + (1 - eps) * fake).requires_grad_(True)
        (g,) = torch.autograd.grad(disc(mix).sum(), mix, create_graph=True)
        penalty = ((g.norm(2, dim=1) - 1) ** 2).mean()
        loss = disc(fake).mean() - disc(real).mean() + 10 * penalty
        opt.zero_grad()
        loss.backward()
        opt.step()
    return loss.item()


def truncated_bptt():
    torch.manual_seed(0)
    rnn, head = nn.GRU(3, 5, batch_first=True), nn.Linear(5, 1)
    opt = torch.optim.SGD(list(rnn.parameters()) + list(head.parameters()), lr=0.1)
    hidden = torch.zeros(1, 2, 5)
    for _ in range(3):
        out, hidden = rnn(torch.randn(2, 4, 3), hidden)
        loss = head(out).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        hidden = hidden.detach()
    return loss.item()


def frozen_backbone_and_validation():
    torch.manual_seed(0)
    backbone, head = _mlp(4, 8, 8), nn.Linear(8, 2)
    backbone.requires_grad_(False)
    params = [p for p in list(backbone.parameters()) + list(head.parameters()) if p.requires_grad]
    opt = torch.optim.SGD(params, lr=0.1)
    best, best_loss = None, float("inf")
    for _ in range(3):
        x, y = torch.randn(4, 4), torch.randint(0, 2, (4,))
        loss = F.cross_entropy(head(backbone(x)), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        head.eval()
        total = 0.0
        with torch.no_grad():
            for _ in range(2):
                total += F.cross_entropy(head(backbone(torch.randn(4, 4))), y).item()
        head.train()
        if total < best_loss:
            best_loss, best = total, copy.deepcopy(head.state_dict())
    head.load_state_dict(best)
    return best_loss


class _Clamp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, lo, hi):
        ctx.save_for_backward(x)
        ctx.lo, ctx.hi = lo, hi
        return x.clamp(lo, hi)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        mask = (x >= ctx.lo) & (x <= ctx.hi)
        return grad_output * mask, None, None


class _ReluInplace(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x.clamp_(min=0)
        ctx.mark_dirty(x)
        ctx.save_for_backward(x)
        return x

    @staticmethod
    def backward(ctx, grad_output):
        (y,) = ctx.saved_tensors
        return grad_output * (y > 0)


def custom_functions_done_right():
    w = torch.randn(5, requires_grad=True)
    a = _Clamp.apply(w * 2, -1.0, 1.0)
    b = _ReluInplace.apply(w * 3)
    (a.sum() + b.sum()).backward()
    return w.grad


def hooks_and_retain_graph():
    torch.manual_seed(0)
    model = _mlp()
    seen = []
    handle = model[0].register_full_backward_hook(lambda m, gi, go: seen.append(go[0].shape))
    out = model(torch.randn(3, 4))
    l1, l2 = out[:, 0].sum(), out[:, 1].sum()
    l1.backward(retain_graph=True)
    l2.backward()
    handle.remove()
    return len(seen)


def logging_detached_values():
    torch.manual_seed(0)
    model = _mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    history, grads = [], []
    running = 0.0
    for _ in range(5):
        opt.zero_grad()
        out = model(torch.randn(3, 4))
        loss = out.pow(2).mean()
        loss.backward()
        grads.append(model[0].weight.grad.norm().item())
        opt.step()
        history.append({"loss": loss.detach(), "out": out.detach().mean()})
        running += loss.item()
    return running


IDIOMS = [pgd_attack, attack_on_a_graph_tensor_through_autograd_grad, fgsm_with_backward, saliency_map, dqn_target_network, ema_of_weights,
          gradient_accumulation, gan_with_detach, wgan_gradient_penalty, truncated_bptt,
          frozen_backbone_and_validation, custom_functions_done_right, hooks_and_retain_graph,
          logging_detached_values]


@pytest.mark.parametrize("deep", [False, True], ids=["default", "deep"])
@pytest.mark.parametrize("idiom", IDIOMS, ids=lambda f: f.__name__)
def test_idiom_is_silent(idiom, deep):
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plain = idiom()
        torch.manual_seed(0)
        with monitor(deep=deep) as m:
            watched = idiom()
    assert not m.findings, [(f.code, f.line, f.message) for f in m.findings]
    if isinstance(plain, torch.Tensor):
        assert torch.equal(plain, watched)
    else:
        assert plain == watched
