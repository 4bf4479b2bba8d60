"""The trainer: runs the epochs and collects the step outputs."""
import torch

device = torch.device("cpu")


class AvgMeter(object):
    def __init__(self, n_max=50):
        self.n_max, self.values = n_max, []

    def __call__(self, value):
        self.values = (self.values + [value])[-self.n_max:]
        return sum(self.values) / len(self.values)


def sample_to_device(batch):
    return {k: v.to(device) for k, v in batch.items()}


class HorovodTrainer(object):
    def __init__(self, max_epochs=1):
        self.max_epochs = max_epochs
        self.avg_loss = AvgMeter(50)

    def fit(self, module, train_dataloader):
        module = module.to(device)
        module.configure_optimizers()
        optimizer, scheduler = module.optimizer, module.scheduler
        for epoch in range(module.current_epoch, self.max_epochs):
            self.last_outputs, self.epoch_result = self.train(train_dataloader, module, optimizer)
            module.current_epoch += 1
            scheduler.step()

    def train(self, dataloader, module, optimizer):
        module.train()
        outputs = []
        for i, batch in enumerate(dataloader):
            optimizer.zero_grad()
            batch = sample_to_device(batch)
            output = module.training_step(batch, i)
            output['loss'].backward()
            optimizer.step()
            output['loss'] = output['loss'].detach()
            outputs.append(output)
            self.avg_loss(output['loss'].item())
        return outputs, module.training_epoch_end(outputs)
