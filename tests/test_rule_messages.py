"""A finding's message says what holds for the code at hand (the fixtures check where findings
are, not what they say)."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path
from typing import List

from click.testing import CliRunner

from gradlint.cli import main


def _lint(tmp_path: Path, src: str) -> List[dict]:
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "m.py").write_text(textwrap.dedent(src))
    old = os.getcwd()
    os.chdir(tmp_path)
    try:
        r = CliRunner().invoke(main, ["check", "--no-cache", "--format", "json", "m.py"], catch_exceptions=False)
    finally:
        os.chdir(old)
    return json.loads(r.stdout)


HOOKS = """\
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    seen = []


    def reads_input(module, grad_input, grad_output):
        seen.append(grad_input[0])


    def reads_output(module, grad_input, grad_output):
        seen.append(grad_output[0].norm())


    def counts(module, grad_input, grad_output):
        seen.append(1)


    def nothing(module, grad_input, grad_output):
        \"\"\"Only registered.\"\"\"


    def replaces(module, grad_input, grad_output):
        return tuple(g * 0 for g in grad_output)


    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(5, 3)
            self.out = nn.Linear(3, 5)

        def forward(self, t):
            return F.linear(self.embed(t), self.out.weight, self.out.bias)


    def main():
        layer = nn.Linear(3, 3)
        layer.register_backward_hook(reads_input)
        layer.register_backward_hook(reads_output)
        layer.register_backward_hook(counts)
        layer.register_backward_hook(nothing)
        layer.register_backward_hook(replaces)
        layer.register_backward_hook(lambda m, gi, go: None)
        layer.register_backward_hook(lambda m, gi, go: seen.append(go[0]))
        tied = Tied()
        tied.out.register_backward_hook(reads_input)
        tied.embed.register_backward_hook(reads_input)
    """


def test_gl705_says_what_the_hook_reads(tmp_path: Path):
    items = {i["line"]: i["message"] for i in _lint(tmp_path, HOOKS) if i["code"] == "GL705"}
    # reads_input, reads_output, counts, replaces, the grad_output lambda, the called submodule
    assert sorted(items) == [40, 41, 42, 44, 46, 49]
    assert "its grad_input holds the gradients of the inputs of the module's last autograd op" in items[40]
    assert "reads only grad_output, which is right" in items[41]
    assert "reads neither grad_input nor grad_output" in items[42]
    assert "its grad_input holds" in items[44]  # its return value replaces grad_input
    assert "reads only grad_output" in items[46]
    assert "its grad_input holds" in items[49]  # `embed` is called by forward; `out` never is (line 48)


def test_gl201_inference_method_without_callers_is_a_warning_that_says_why(tmp_path: Path):
    src = """\
        import torch
        import torch.nn as nn


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(2, 2)

            def forward(self, x):
                return self.fc(x)

            def predict(self, x):
                return (x @ self.fc.weight.t()).numpy()

            def project(self, x):
                return (x @ self.fc.weight.t()).numpy()
        """
    items = {i["line"]: i for i in _lint(tmp_path, src)}
    assert sorted(items) == [14, 17]
    assert items[14]["severity"] == "warning" and "if `predict` runs with grad on" in items[14]["message"]
    assert items[17]["severity"] == "error" and "torch raises RuntimeError here;" in items[17]["message"]


def test_gl707_says_what_repeats_the_registration_and_how_the_handle_is_lost(tmp_path: Path):
    src = """\
        import torch
        import torch.nn as nn

        net = nn.Linear(2, 2)


        def train(model, batches):
            for x in batches:
                model.register_forward_hook(lambda m, i, o: None)
                model(x)


        class Probe(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(2, 2)

            def forward(self, x):
                self.handle = self.fc.register_forward_hook(lambda m, i, o: None)
                return self.fc(x)


        class Extractor:
            def __init__(self, model):
                h = model.register_forward_hook(lambda m, i, o: None)


        extractors = [Extractor(net) for _ in range(3)]
        """
    items = {i["line"]: i for i in _lint(tmp_path, src) if i["code"] == "GL707"}
    assert sorted(items) == [9, 19, 25]
    assert "runs on every iteration of this loop, and its handle is dropped" in items[9]["message"]
    assert "runs on every call of `forward()`, and the handle is stored where the next registration overwrites it" \
        in items[19]["message"]
    assert items[19]["column"] == 9  # at the assignment that loses the previous handle
    assert "once per `Extractor(...)` call in a loop that passes the same module each time, and its handle is " \
           "never removed" in items[25]["message"]
    assert [r["line"] for r in items[9]["related"]] == [8]


def test_gl308_names_the_dtype_and_the_form(tmp_path: Path):
    src = """\
        import torch
        import torch.nn as nn


        def step(logits, mask):
            idx = logits.argmax(1)
            idx.requires_grad_()
            keep = nn.Parameter(mask.bool())
            w = torch.tensor([1, 2], requires_grad=True)
            return idx, keep, w
        """
    items = {i["line"]: i["message"] for i in _lint(tmp_path, src) if i["code"] == "GL308"}
    assert sorted(items) == [7, 8, 9]
    assert items[7].startswith("`.requires_grad_()` on an integer tensor (`torch.int64`)")
    assert items[8].startswith("`nn.Parameter(...)` on a bool tensor (`torch.bool`)")
    assert items[9].startswith("`torch.tensor(..., requires_grad=True)` makes an integer tensor (`torch.int64`)")
