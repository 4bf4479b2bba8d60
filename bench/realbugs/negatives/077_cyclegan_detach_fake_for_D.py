# Source: https://github.com/junyanz/pytorch-CycleGAN-and-pix2pix/issues/916
# Category: stray-detach
# Expect: ok
"""CycleGAN detaches the fake image only in the discriminator loss (backward_D_basic) and not in the generator
loss, and turns off requires_grad of the discriminators during the generator step; a user asked why, and the
maintainer explained that D's update needs no gradient for G. Correct as written."""
import itertools

import torch
import torch.nn as nn

torch.manual_seed(0)
device = torch.device("cpu")


def define_G():
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 3, 3, padding=1), nn.Tanh())


def define_D():
    return nn.Sequential(nn.Conv2d(3, 8, 4, stride=2, padding=1), nn.LeakyReLU(0.2), nn.Conv2d(8, 1, 4, padding=1))


class GANLoss(nn.Module):
    def __init__(self):
        super().__init__()
        self.loss = nn.MSELoss()

    def __call__(self, prediction, target_is_real):
        target = torch.ones_like(prediction) if target_is_real else torch.zeros_like(prediction)
        return self.loss(prediction, target)


def grads_of(net):
    return [None if p.grad is None else p.grad.clone() for p in net.parameters()]


def same_grads(a, b):
    return all((x is None and y is None) or (x is not None and y is not None and torch.equal(x, y)) for x, y in zip(a, b))


class CycleGANModel(object):
    def __init__(self, lambda_A=10.0, lambda_B=10.0):
        self.netG_A, self.netG_B = define_G().to(device), define_G().to(device)
        self.netD_A, self.netD_B = define_D().to(device), define_D().to(device)
        self.criterionGAN = GANLoss()
        self.criterionCycle = nn.L1Loss()
        self.lambda_A, self.lambda_B = lambda_A, lambda_B
        self.optimizer_G = torch.optim.Adam(itertools.chain(self.netG_A.parameters(), self.netG_B.parameters()), lr=2e-4, betas=(0.5, 0.999))
        self.optimizer_D = torch.optim.Adam(itertools.chain(self.netD_A.parameters(), self.netD_B.parameters()), lr=2e-4, betas=(0.5, 0.999))

    def set_input(self, real_A, real_B):
        self.real_A, self.real_B = real_A.to(device), real_B.to(device)

    def set_requires_grad(self, nets, requires_grad=False):
        for net in nets:
            for param in net.parameters():
                param.requires_grad = requires_grad

    def forward(self):
        self.fake_B = self.netG_A(self.real_A)
        self.rec_A = self.netG_B(self.fake_B)
        self.fake_A = self.netG_B(self.real_B)
        self.rec_B = self.netG_A(self.fake_A)

    def backward_D_basic(self, netD, real, fake):
        loss_D_real = self.criterionGAN(netD(real), True)
        loss_D_fake = self.criterionGAN(netD(fake.detach()), False)
        loss_D = (loss_D_real + loss_D_fake) * 0.5
        loss_D.backward()
        return loss_D

    def backward_D_A(self):
        self.loss_D_A = self.backward_D_basic(self.netD_A, self.real_B, self.fake_B)

    def backward_D_B(self):
        self.loss_D_B = self.backward_D_basic(self.netD_B, self.real_A, self.fake_A)

    def backward_G(self):
        self.loss_G_A = self.criterionGAN(self.netD_A(self.fake_B), True)
        self.loss_G_B = self.criterionGAN(self.netD_B(self.fake_A), True)
        self.loss_cycle_A = self.criterionCycle(self.rec_A, self.real_A) * self.lambda_A
        self.loss_cycle_B = self.criterionCycle(self.rec_B, self.real_B) * self.lambda_B
        self.loss_G = self.loss_G_A + self.loss_G_B + self.loss_cycle_A + self.loss_cycle_B
        self.loss_G.backward()

    def optimize_parameters(self):
        self.forward()
        self.set_requires_grad([self.netD_A, self.netD_B], False)
        self.optimizer_G.zero_grad()
        d_before = grads_of(self.netD_A)
        self.backward_G()
        self.D_untouched_by_G = same_grads(d_before, grads_of(self.netD_A))
        g_after_G = grads_of(self.netG_A)
        self.optimizer_G.step()
        self.set_requires_grad([self.netD_A, self.netD_B], True)
        self.optimizer_D.zero_grad()
        self.backward_D_A()
        self.backward_D_B()
        self.G_untouched_by_D = same_grads(g_after_G, grads_of(self.netG_A))
        self.optimizer_D.step()


model = CycleGANModel()
g_before = model.netG_A[0].weight.detach().clone()
d_before = model.netD_A[0].weight.detach().clone()
for i in range(3):
    model.set_input(torch.rand(2, 3, 16, 16) * 2 - 1, torch.rand(2, 3, 16, 16) * 2 - 1)
    model.optimize_parameters()

assert not torch.equal(g_before, model.netG_A[0].weight) and not torch.equal(d_before, model.netD_A[0].weight)
assert model.D_untouched_by_G  # D's requires_grad is off during the G step
assert model.G_untouched_by_D  # the D losses use fake.detach(), so they add nothing to G's grads
print("OK: G and D both trained; the D loss on fake.detach() did not reach G; the G step left D's grads untouched")
