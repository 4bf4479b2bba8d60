# Source: https://github.com/thunlp/OpenKE/pull/131
# Category: state-dict-alias
# Expect: ok
"""OpenKE's trainer keeps `best_model = self.trainModel.state_dict()` when the validation hit@10 improves and
stores it after early stopping; the fix deep-copies it, otherwise the best model is always the newest one."""
import torch

from openke.config import Config
from openke.models import TransE

torch.manual_seed(0)

ent_tot, rel_tot = 60, 3
h = torch.randint(0, ent_tot, (40,))
r = torch.randint(0, rel_tot, (40,))
t = (h + 7 * r + 1) % ent_tot
model = TransE(ent_tot, rel_tot)
con = Config(model, (h, t, r), (h[:20], t[:20], r[:20]), ent_tot)
best_model, best_epoch = con.run()
print("validation history:", con.history)

key = "ent_embeddings.weight"
assert best_epoch < con.last_epoch
assert torch.equal(best_model[key], con.best_snapshot[key])
assert not torch.equal(best_model[key], model.ent_embeddings.weight)
print("OK: the best state_dict still holds the weights of epoch", best_epoch, "after training ran to epoch", con.last_epoch)
