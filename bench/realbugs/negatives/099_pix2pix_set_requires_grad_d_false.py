# Source: https://github.com/junyanz/pytorch-CycleGAN-and-pix2pix/issues/594
# Category: frozen-by-no-grad-forward
# Expect: ok
"""The CycleGAN/pix2pix models call `set_requires_grad(self.netD, False)` before the generator update; a reader asked why the
generator does not also get frozen for the D step. The answer: it is only a speed-up - with D's parameters frozen the gradient still
flows through D into G, and D is simply not given gradients it would not use."""
import torch
import torch.nn as nn

torch.manual_seed(0)


class Pix2PixModel(object):
    def __init__(self, lambda_L1=100.0):
        self.netG = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 3, 3, padding=1), nn.Tanh())
        self.netD = nn.Sequential(nn.Conv2d(6, 8, 4, 2, 1), nn.LeakyReLU(0.2, True), nn.Conv2d(8, 1, 4, 1, 1))
        self.criterionGAN = nn.BCEWithLogitsLoss()
        self.criterionL1 = nn.L1Loss()
        self.lambda_L1 = lambda_L1
        self.optimizer_G = torch.optim.Adam(self.netG.parameters(), lr=2e-4, betas=(0.5, 0.999))
        self.optimizer_D = torch.optim.Adam(self.netD.parameters(), lr=2e-4, betas=(0.5, 0.999))

    def set_requires_grad(self, nets, requires_grad=False):
        if not isinstance(nets, list):
            nets = [nets]
        for net in nets:
            if net is not None:
                for param in net.parameters():
                    param.requires_grad = requires_grad

    def set_input(self, real_A, real_B):
        self.real_A, self.real_B = real_A, real_B

    def forward(self):
        self.fake_B = self.netG(self.real_A)

    def backward_D(self):
        fake_AB = torch.cat((self.real_A, self.fake_B), 1)
        pred_fake = self.netD(fake_AB.detach())
        self.loss_D_fake = self.criterionGAN(pred_fake, torch.zeros_like(pred_fake))
        real_AB = torch.cat((self.real_A, self.real_B), 1)
        pred_real = self.netD(real_AB)
        self.loss_D_real = self.criterionGAN(pred_real, torch.ones_like(pred_real))
        self.loss_D = (self.loss_D_fake + self.loss_D_real) * 0.5
        self.loss_D.backward()

    def backward_G(self):
        fake_AB = torch.cat((self.real_A, self.fake_B), 1)
        pred_fake = self.netD(fake_AB)
        self.loss_G_GAN = self.criterionGAN(pred_fake, torch.ones_like(pred_fake))
        self.loss_G_L1 = self.criterionL1(self.fake_B, self.real_B) * self.lambda_L1
        self.loss_G = self.loss_G_GAN + self.loss_G_L1
        self.loss_G.backward()

    def optimize_parameters(self):
        self.forward()
        self.set_requires_grad(self.netD, True)
        self.optimizer_D.zero_grad()
        self.backward_D()
        self.optimizer_D.step()
        self.d_grad_after_D_step = self.netD[0].weight.grad.detach().clone()
        self.set_requires_grad(self.netD, False)
        self.optimizer_G.zero_grad()
        self.backward_G()
        self.optimizer_G.step()


model = Pix2PixModel()
g_before = model.netG[0].weight.detach().clone()
for step in range(2):
    model.set_input(torch.randn(2, 3, 16, 16), torch.randn(2, 3, 16, 16))
    model.optimize_parameters()

# D's .grad is exactly what its own step produced: the generator step added nothing to it
assert torch.equal(model.d_grad_after_D_step, model.netD[0].weight.grad)
# the generator still received the adversarial gradient through the frozen D
model.netG.zero_grad()
fake_AB = torch.cat((model.real_A, model.netG(model.real_A)), 1)
pred = model.netD(fake_AB)
model.criterionGAN(pred, torch.ones_like(pred)).backward()
assert model.netG[0].weight.grad is not None and model.netG[0].weight.grad.abs().sum() > 0
assert not torch.equal(g_before, model.netG[0].weight)
print("OK: with netD frozen, the adversarial loss still trains netG and leaves netD's gradients untouched")
