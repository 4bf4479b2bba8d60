# Source: https://github.com/lucidrains/CoCa-pytorch/issues/6
# Category: stray-detach
# Expect: ok
"""CoCa wraps a ViT in vit-pytorch's Extractor to get image tokens; a user found the hook saves
`t.clone().detach()`, so the image encoder is cut from the contrastive and caption losses (fixed by an
Extractor option that keeps the graph)."""
import torch
import torch.nn.functional as F
from torch import einsum, nn

torch.manual_seed(0)


def exists(val):
    return val is not None


def apply_tuple_or_single(fn, val):
    if isinstance(val, tuple):
        return tuple(map(fn, val))
    return fn(val)


class ViT(nn.Module):
    def __init__(self, image_size=16, patch_size=4, dim=32, depth=2, heads=4, num_classes=10):
        super().__init__()
        num_patches = (image_size // patch_size) ** 2
        self.to_patch_embedding = nn.Sequential(nn.Conv2d(3, dim, patch_size, stride=patch_size), nn.Flatten(2))
        self.pos_embedding = nn.Parameter(torch.randn(1, num_patches, dim))
        layer = nn.TransformerEncoderLayer(dim, heads, dim * 2, dropout=0.0, batch_first=True)
        self.transformer = nn.TransformerEncoder(layer, depth)
        self.mlp_head = nn.Linear(dim, num_classes)

    def forward(self, img):
        x = self.to_patch_embedding(img).transpose(1, 2) + self.pos_embedding
        x = self.transformer(x)
        return self.mlp_head(x.mean(dim=1))


class Extractor(nn.Module):
    def __init__(self, vit, device=None, layer_name="transformer", return_embeddings_only=False):
        super().__init__()
        self.vit = vit
        self.latents = None
        self.hooks = []
        self.hook_registered = False
        self.device = device
        self.layer_name = layer_name
        self.return_embeddings_only = return_embeddings_only

    def _hook(self, _, inputs, output):
        self.latents = apply_tuple_or_single(lambda t: t, output)

    def _register_hook(self):
        layer = getattr(self.vit, self.layer_name)
        handle = layer.register_forward_hook(self._hook)
        self.hooks.append(handle)
        self.hook_registered = True

    def clear(self):
        del self.latents
        self.latents = None

    def forward(self, img, return_embeddings_only=False):
        self.clear()
        if not self.hook_registered:
            self._register_hook()
        pred = self.vit(img)
        target_device = self.device if exists(self.device) else img.device
        latents = apply_tuple_or_single(lambda t: t.to(target_device), self.latents)
        if return_embeddings_only or self.return_embeddings_only:
            return latents
        return pred, latents


class CoCa(nn.Module):
    def __init__(self, dim=32, img_encoder=None, num_tokens=50, num_img_queries=4, caption_loss_weight=1.0,
                 contrastive_loss_weight=1.0):
        super().__init__()
        self.img_encoder = img_encoder
        self.token_emb = nn.Embedding(num_tokens, dim)
        self.text_cls_token = nn.Parameter(torch.randn(dim))
        self.img_queries = nn.Parameter(torch.randn(num_img_queries + 1, dim))
        self.img_attn_pool = nn.MultiheadAttention(dim, 4, batch_first=True)
        self.unimodal = nn.TransformerEncoder(nn.TransformerEncoderLayer(dim, 4, dim * 2, 0.0, batch_first=True), 1)
        self.multimodal = nn.TransformerDecoder(nn.TransformerDecoderLayer(dim, 4, dim * 2, 0.0, batch_first=True), 1)
        self.to_logits = nn.Linear(dim, num_tokens)
        self.temperature = nn.Parameter(torch.Tensor([1.0]))
        self.caption_loss_weight = caption_loss_weight
        self.contrastive_loss_weight = contrastive_loss_weight

    def embed_image(self, images):
        image_tokens = self.img_encoder(images)
        img_queries = self.img_queries.unsqueeze(0).expand(image_tokens.shape[0], -1, -1)
        img_queries, _ = self.img_attn_pool(img_queries, image_tokens, image_tokens)
        return img_queries[:, 0], img_queries[:, 1:]

    def embed_text(self, text):
        tokens = self.token_emb(text)
        cls = self.text_cls_token.expand(text.shape[0], 1, -1)
        tokens = self.unimodal(torch.cat((tokens, cls), dim=1))
        return tokens[:, :-1], tokens[:, -1]

    def forward(self, text, images):
        text, labels = text[:, :-1], text[:, 1:]
        text_tokens, text_embeds = self.embed_text(text)
        image_embeds, image_tokens = self.embed_image(images)
        text_tokens = self.multimodal(text_tokens, image_tokens)
        logits = self.to_logits(text_tokens)
        caption_loss = F.cross_entropy(logits.transpose(1, 2), labels) * self.caption_loss_weight

        text_embeds, image_embeds = map(lambda t: F.normalize(t, dim=-1), (text_embeds, image_embeds))
        sim = einsum("i d, j d -> i j", text_embeds, image_embeds) * self.temperature.exp()
        contrastive_labels = torch.arange(text.shape[0])
        contrastive_loss = (F.cross_entropy(sim, contrastive_labels) + F.cross_entropy(sim.t(), contrastive_labels)) * 0.5
        return caption_loss + contrastive_loss * self.contrastive_loss_weight


vit = ViT()
vit = Extractor(vit, return_embeddings_only=True)
coca = CoCa(img_encoder=vit)
optimizer = torch.optim.AdamW(coca.parameters(), lr=1e-4)

for step in range(2):
    text = torch.randint(0, 50, (4, 9))
    images = torch.randn(4, 3, 16, 16)
    loss = coca(text, images)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()

vit_params = list(coca.img_encoder.vit.transformer.parameters()) + list(coca.img_encoder.vit.to_patch_embedding.parameters())
assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in vit_params)
print("OK: the vision transformer is trained by the CoCa losses")
