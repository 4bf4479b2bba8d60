# Source: https://github.com/utkuozbulak/pytorch-cnn-visualizations/pull/43
# Category: detach-new-leaf
# Expect: ok
"""A CNN-visualization repo makes the preprocessed image a leaf that requires grad once, in
preprocess_image, and reads the input gradient from a backward hook on the first layer; a PR proposed
setting requires_grad again in every method, and the author explained the preprocessing already does it."""
import numpy as np
import torch
import torch.nn as nn
from torch.autograd import Variable

torch.manual_seed(0)
rng = np.random.RandomState(0)


def preprocess_image(pil_im, resize_im=True):
    mean = [0.485, 0.456, 0.406]
    std = [0.229, 0.224, 0.225]
    im_as_arr = np.float32(pil_im).transpose(2, 0, 1) / 255
    for channel, _ in enumerate(im_as_arr):
        im_as_arr[channel] -= mean[channel]
        im_as_arr[channel] /= std[channel]
    im_as_ten = torch.from_numpy(im_as_arr).float()
    im_as_ten.unsqueeze_(0)
    im_as_var = Variable(im_as_ten, requires_grad=True)
    return im_as_var


class AlexNetTiny(nn.Module):
    def __init__(self, num_classes=5):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                      nn.Conv2d(8, 8, 3, padding=1), nn.ReLU())
        self.classifier = nn.Linear(8 * 8 * 8, num_classes)

    def forward(self, x):
        return self.classifier(self.features(x).flatten(1))


class VanillaBackprop():
    """Produces gradients generated with vanilla back propagation from the image."""

    def __init__(self, model):
        self.model = model
        self.gradients = None
        self.model.eval()
        self.hook_layers()

    def hook_layers(self):
        def hook_function(module, grad_in, grad_out):
            self.gradients = grad_in[0]

        first_layer = list(self.model.features._modules.items())[0][1]
        first_layer.register_full_backward_hook(hook_function)

    def generate_gradients(self, input_image, target_class):
        model_output = self.model(input_image)
        self.model.zero_grad()
        one_hot_output = torch.FloatTensor(1, model_output.size()[-1]).zero_()
        one_hot_output[0][target_class] = 1
        model_output.backward(gradient=one_hot_output)
        gradients_as_arr = self.gradients.data.numpy()[0]
        return gradients_as_arr


original_image = (rng.rand(16, 16, 3) * 255).astype(np.uint8)
prep_img = preprocess_image(original_image)
pretrained_model = AlexNetTiny()
VBP = VanillaBackprop(pretrained_model)
vanilla_grads = VBP.generate_gradients(prep_img, target_class=2)

assert prep_img.is_leaf and prep_img.grad is not None
assert vanilla_grads.shape == (3, 16, 16) and np.abs(vanilla_grads).sum() > 0
assert np.allclose(vanilla_grads, prep_img.grad[0].numpy(), atol=1e-6)
print("OK: the saliency gradient from the hook equals the leaf input's .grad")
