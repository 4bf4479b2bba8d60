# Source: https://github.com/coqui-ai/TTS/issues/2348
# Category: frozen-by-no-grad-forward
# Expect: ok
"""YourTTS adds a speaker-consistency loss by running generated audio through a frozen ResNet speaker
encoder; a user noticed the encoder's forward computes the spectrogram inside torch.no_grad(), so the
loss term is a constant and the generator gets no gradient from it."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class TorchSpec(nn.Module):
    def __init__(self, n_fft=64, hop_length=16, n_mels=16):
        super().__init__()
        self.n_fft, self.hop_length = n_fft, hop_length
        self.register_buffer("window", torch.hann_window(n_fft))
        self.register_buffer("mel_basis", torch.rand(n_mels, n_fft // 2 + 1))

    def forward(self, x):
        spec = torch.stft(x, self.n_fft, self.hop_length, window=self.window, return_complex=True).abs()
        return self.mel_basis @ spec


class ResNetSpeakerEncoder(nn.Module):
    def __init__(self, input_dim=16, proj_dim=32, use_torch_spec=True, log_input=True):
        super().__init__()
        self.use_torch_spec = use_torch_spec
        self.log_input = log_input
        self.torch_spec = TorchSpec(n_mels=input_dim)
        self.instancenorm = nn.InstanceNorm1d(input_dim)
        self.conv1 = nn.Conv2d(1, 8, kernel_size=3, padding=1)
        self.relu = nn.ReLU(inplace=True)
        self.bn1 = nn.BatchNorm2d(8)
        self.layer1 = nn.Sequential(nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(), nn.BatchNorm2d(8))
        self.attention = nn.Sequential(nn.Conv1d(8 * input_dim, 32, 1), nn.ReLU(), nn.Conv1d(32, 8 * input_dim, 1),
                                       nn.Softmax(dim=2))
        self.fc = nn.Linear(8 * input_dim, proj_dim)

    def forward(self, x, l2_norm=False):
        x = x.squeeze(1)
        if self.use_torch_spec:
            x = self.torch_spec(x)
        if self.log_input:
            x = (x + 1e-6).log()
        x = self.instancenorm(x).unsqueeze(1)

        x = self.conv1(x)
        x = self.relu(x)
        x = self.bn1(x)
        x = self.layer1(x)
        x = x.reshape(x.size()[0], -1, x.size()[-1])
        w = self.attention(x)
        x = torch.sum(x * w, dim=2)
        x = self.fc(x.view(x.size()[0], -1))
        if l2_norm:
            x = F.normalize(x, p=2, dim=1)
        return x


class Generator(nn.Module):
    """Stands in for the VITS HiFi-GAN decoder: latent frames -> waveform."""

    def __init__(self, z_dim=8, upsample=16):
        super().__init__()
        self.pre = nn.Conv1d(z_dim, 16, 3, padding=1)
        self.up = nn.ConvTranspose1d(16, 8, upsample, stride=upsample)
        self.post = nn.Conv1d(8, 1, 7, padding=3)

    def forward(self, z):
        x = F.leaky_relu(self.pre(z), 0.1)
        x = F.leaky_relu(self.up(x), 0.1)
        return torch.tanh(self.post(x))


generator = Generator()
speaker_encoder = ResNetSpeakerEncoder().eval()
speaker_encoder.requires_grad_(False)  # the speaker encoder is frozen in YourTTS
optimizer = torch.optim.AdamW(generator.parameters(), lr=2e-4)
speaker_encoder_loss_alpha = 9.0

for step in range(3):
    z = torch.randn(2, 8, 32)
    y = torch.randn(2, 1, 512) * 0.3
    y_hat = generator(z)

    loss_mel = F.l1_loss(y_hat, y) * 45
    # speaker consistency loss: embeddings of ground truth and generated audio should match
    wavs_batch = torch.cat((y, y_hat), dim=0)
    pred_embs = speaker_encoder(wavs_batch, l2_norm=True)
    gt_spk_emb, syn_spk_emb = torch.chunk(pred_embs, 2, dim=0)
    loss_spk = -F.cosine_similarity(gt_spk_emb, syn_spk_emb).mean() * speaker_encoder_loss_alpha

    loss = loss_mel + loss_spk
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()

assert loss_spk.grad_fn is not None
# a fresh forward: how much does the speaker term alone push the generator?
syn_spk_emb = speaker_encoder(generator(z), l2_norm=True)
loss_spk = -F.cosine_similarity(gt_spk_emb.detach(), syn_spk_emb).mean() * speaker_encoder_loss_alpha
grads = torch.autograd.grad(loss_spk, list(generator.parameters()))
assert all(g.abs().sum() > 0 for g in grads)
print("OK: the speaker-consistency loss back-propagates through the frozen encoder into the generator")
