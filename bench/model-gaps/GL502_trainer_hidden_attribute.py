"""GL502 recall: a recurrent hidden state kept in self.hidden (set in setup(), not __init__) and carried across iterations of fit() without detach(); the same code with a local 'hidden' is reported, the attribute form is not."""

import torch
import torch.nn as nn

from gradlint.testing import raises


SECOND_TIME = "Trying to backward through the graph a second time"


class _RNNTrainer:
    def setup(self):
        torch.manual_seed(0)
        self.rnn, self.head = nn.RNN(3, 4, batch_first=True), nn.Linear(4, 1)
        self.optimizer = torch.optim.SGD([*self.rnn.parameters(), *self.head.parameters()], lr=0.1)
        self.hidden = torch.zeros(1, 2, 4)

    def fit(self, steps):
        for _ in range(steps):
            self.optimizer.zero_grad()
            output, self.hidden = self.rnn(torch.randn(2, 5, 3), self.hidden)  # expected error: GL502 (gradlint: see header)
            self.head(output).sum().backward()
            self.optimizer.step()


@raises(RuntimeError, SECOND_TIME)
def bad_trainer_hidden_state_set_in_setup():
    trainer = _RNNTrainer()
    trainer.setup()
    trainer.fit(2)



def _show(fn):
    try:
        print(fn.__name__, "->", fn())
    except Exception as e:
        print(fn.__name__, "-> raised", type(e).__name__ + ":", str(e).splitlines()[0])


if __name__ == "__main__":
    _show(bad_trainer_hidden_state_set_in_setup)
