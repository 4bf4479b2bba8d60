"""Base class of the attacks."""


class Attack(object):
    def __init__(self, name, model):
        self.attack = name
        self.model = model
        self.device = next(model.parameters()).device

    def __call__(self, *args, **kwargs):
        self.model.eval()
        return self.forward(*args, **kwargs)
