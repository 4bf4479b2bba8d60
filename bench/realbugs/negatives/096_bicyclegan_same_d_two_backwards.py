# Source: https://github.com/junyanz/BicycleGAN/issues/93
# Category: backward-twice
# Expect: ok
"""With `use_same_D`, BicycleGAN calls `backward_D(self.netD, ...)` twice (encoded pair, then random-z pair) before one
`optimizer_D.step()`; a reader first thought the second backward needs retain_graph or overwrites the first, then saw that the two
separate graphs simply accumulate into netD's .grad - the code is correct."""
import torch
import torch.nn as nn

torch.manual_seed(0)


class GANLoss(nn.Module):
    def __init__(self):
        super().__init__()
        self.loss = nn.MSELoss()

    def __call__(self, predictions, target_is_real):
        all_losses = []
        for pred in predictions:
            target = torch.ones_like(pred) if target_is_real else torch.zeros_like(pred)
            all_losses.append(self.loss(pred, target))
        return sum(all_losses), all_losses


class BiCycleGANModel(object):
    def __init__(self):
        self.netG = nn.Sequential(nn.Linear(8 + 4, 16), nn.ReLU(), nn.Linear(16, 8))
        self.netE = nn.Linear(8, 4)
        self.netD = nn.Sequential(nn.Linear(8, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1))
        self.criterionGAN = GANLoss()
        self.optimizer_D = torch.optim.Adam(self.netD.parameters(), lr=2e-4, betas=(0.5, 0.999))
        self.use_same_D = True

    def set_input(self, real_A, real_B):
        half = real_A.size(0) // 2
        self.real_A_encoded, self.real_B_encoded = real_A[:half], real_B[:half]
        self.real_A_random, self.real_B_random = real_A[half:], real_B[half:]

    def forward(self):
        self.z_encoded = self.netE(self.real_B_encoded)
        self.z_random = torch.randn_like(self.z_encoded)
        self.fake_B_encoded = self.netG(torch.cat([self.real_A_encoded, self.z_encoded], 1))
        self.fake_B_random = self.netG(torch.cat([self.real_A_encoded, self.z_random], 1))
        self.real_data_encoded, self.fake_data_encoded = self.real_B_encoded, self.fake_B_encoded
        self.real_data_random, self.fake_data_random = self.real_B_random, self.fake_B_random

    def backward_D(self, netD, real, fake):
        pred_fake = netD(fake.detach())
        pred_real = netD(real)
        loss_D_fake, _ = self.criterionGAN([pred_fake], False)
        loss_D_real, _ = self.criterionGAN([pred_real], True)
        loss_D = loss_D_fake + loss_D_real
        loss_D.backward()
        return loss_D, [loss_D_fake, loss_D_real]

    def update_D(self):
        self.optimizer_D.zero_grad()
        self.loss_D, self.losses_D = self.backward_D(self.netD, self.real_data_encoded, self.fake_data_encoded)
        if self.use_same_D:
            self.loss_D2, self.losses_D2 = self.backward_D(self.netD, self.real_data_random, self.fake_data_random)
        self.grads_before_step = [p.grad.detach().clone() for p in self.netD.parameters()]
        self.optimizer_D.step()


model = BiCycleGANModel()
model.set_input(torch.randn(8, 8), torch.randn(8, 8))
model.forward()

# reference: gradient of the summed loss, computed on fresh graphs
netD = model.netD
ref_loss = 0
for real, fake in [(model.real_data_encoded, model.fake_data_encoded), (model.real_data_random, model.fake_data_random)]:
    ref_loss = ref_loss + model.criterionGAN([netD(fake.detach())], False)[0] + model.criterionGAN([netD(real)], True)[0]
ref_grads = torch.autograd.grad(ref_loss, list(netD.parameters()))

model.update_D()
for g, ref in zip(model.grads_before_step, ref_grads):
    assert torch.allclose(g, ref, atol=1e-6)
print("OK: two backward() calls on two separate graphs accumulated exactly the gradient of loss_D + loss_D2")
