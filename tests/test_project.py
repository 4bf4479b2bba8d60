"""The project, not the file: imports of the project's own modules are followed (gradlint.index
finds the module, gradlint.model.imports binds what it defines), through every entry point, with
the cache and parallel runs staying correct."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Dict, List, Tuple

import pytest
from click.testing import CliRunner

from gradlint import engine
from gradlint.cli import main
from gradlint.index import ProjectIndex, find_root, import_root


def write_tree(root: Path, files: Dict[str, str]) -> Path:
    for name, text in files.items():
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text), encoding="utf-8")
    return root


def check(cwd: Path, *args: str) -> Tuple[int, List[dict]]:
    old = os.getcwd()
    os.chdir(cwd)
    try:
        r = CliRunner().invoke(main, ["check", "--format", "json", *args], catch_exceptions=False)
    finally:
        os.chdir(old)
    return r.exit_code, json.loads(r.stdout) if r.stdout.strip().startswith("[") else []


def found(items: List[dict]) -> List[Tuple[str, int, str]]:
    return sorted((i["path"].replace(os.sep, "/"), i["line"], i["code"]) for i in items)


# ------------------------------------------------------------------ a small project
MODELS = """\
    import torch
    import torch.nn as nn


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 1)

        def forward(self, x):
            return self.fc(x)
    """
HELPERS = """\
    import torch


    def sgd_update(w, lr):
        w -= lr * w.grad


    def make_weights():
        return torch.zeros(3, requires_grad=True)
    """
TRAIN = """\
    import torch
    from pkg import Net
    from helpers import sgd_update, make_weights
    import helpers as H


    def main():
        model = Net()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        total = 0
        for step in range(3):
            opt.zero_grad()
            loss = model(torch.ones(2, 3)).sum()
            loss.backward()
            opt.step()
            total += loss
        w = make_weights()
        (w * 2).sum().backward()
        sgd_update(w, 0.1)
        v = H.make_weights()
        v.add_(1)
        return total


    main()
    """


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return write_tree(tmp_path / "proj", {
        "pyproject.toml": "",
        "pkg/__init__.py": "from .models import Net\n",
        "pkg/models.py": MODELS,
        "helpers.py": HELPERS,
        "train.py": TRAIN,
    })


EXPECTED = [("helpers.py", 5, "GL101"), ("train.py", 16, "GL501"), ("train.py", 21, "GL101")]


def test_findings_across_files(project: Path):
    """The in-place update on a leaf is in helpers.py, at the line to change there, with the call
    named; the leaf comes from a factory of helpers.py called through `import helpers as H`; the
    model class comes from pkg/models.py, re-exported by pkg/__init__.py."""
    rc, items = check(project, "--no-cache", ".")
    assert rc == 1 and found(items) == EXPECTED
    (gl101,) = [i for i in items if i["path"].endswith("helpers.py")]
    assert "reached from train.py:19" in gl101["message"]
    assert not gl101["fixable"]


def test_one_file_given_follows_its_imports(project: Path):
    """pre-commit passes only the changed files: their imports still resolve from the project."""
    rc, items = check(project, "--no-cache", "train.py")
    assert found(items) == EXPECTED
    rc, items = check(project / "pkg", "--no-cache", "../train.py")
    assert sorted(i["line"] for i in items) == [5, 16, 21]


def test_no_follow_without_the_other_files(tmp_path: Path, project: Path):
    """The same script alone (its modules absent) is only what the file shows (the loss is
    back-propagated: evidence of a graph, whatever the model is)."""
    alone = write_tree(tmp_path / "alone", {"train.py": TRAIN})
    rc, items = check(alone, "--no-cache", "train.py")
    assert found(items) == [("train.py", 16, "GL501")]


def test_one_name_per_file_when_paths_are_given_absolute(project: Path):
    """A file linted directly and met through an import of another is one file: with the paths
    given absolute (an editor, a CI script), its findings are named absolute both ways and
    reported once, not once per spelling (seen on pytorch/examples: the same GL605 twice)."""
    rc, items = check(project, "--no-cache", str(project / "helpers.py"), str(project / "train.py"))
    assert all(os.path.isabs(i["path"]) for i in items)
    assert sorted((Path(p).relative_to(project).as_posix(), line, code) for p, line, code in found(items)) \
        == EXPECTED
    rc, items = check(project.parent, "--no-cache", str(project))
    assert len(items) == len(EXPECTED) and all(os.path.isabs(i["path"]) for i in items)


def test_stdin_filename_places_the_text_in_its_project(project: Path):
    old = os.getcwd()
    os.chdir(project)
    try:
        r = CliRunner().invoke(main, ["check", "--format", "json", "--stdin-filename", "train.py", "-"],
                               input=textwrap.dedent(TRAIN))
    finally:
        os.chdir(old)
    assert found(json.loads(r.stdout)) == EXPECTED


def test_parallel_runs_give_the_same_findings(project: Path):
    for i in range(12):  # enough source for the pool to start
        write_tree(project, {f"extra/m{i}.py": "import torch\n" + "x = torch.ones(3)\n" * 400})
    one = check(project, "--no-cache", "-j", "1", ".")
    two = check(project, "--no-cache", "-j", "2", ".")
    assert one == two and found(one[1]) == EXPECTED


def test_warm_run_relints_only_the_edited_module_and_its_importers(project: Path, monkeypatch):
    write_tree(project, {"other.py": "import torch\n\n\ndef f(x):\n    return x * 2\n"})
    linted: List[str] = []
    real = engine.lint_data

    def counting(display, data, options, project=None):
        linted.append(display.replace(os.sep, "/"))
        return real(display, data, options, project)

    monkeypatch.setattr(engine, "lint_data", counting)
    assert found(check(project, ".")[1]) == EXPECTED
    assert sorted(linted) == ["helpers.py", "other.py", "pkg/__init__.py", "pkg/models.py", "train.py"]
    linted.clear()
    assert found(check(project, ".")[1]) == EXPECTED
    assert linted == []
    # the factory no longer makes a leaf: train.py's finding on `v` goes, nothing else is linted
    (project / "helpers.py").write_text(textwrap.dedent(HELPERS).replace(", requires_grad=True", ""))
    linted.clear()
    items = check(project, ".")[1]
    assert sorted(linted) == ["helpers.py", "train.py"]
    assert ("train.py", 21, "GL101") not in found(items)
    # an edit to the model's module: it and its importers (pkg/__init__.py, and train.py through
    # it) are linted again, not helpers.py or other.py
    (project / "pkg" / "models.py").write_text(textwrap.dedent(MODELS) + "\n# a comment\n")
    linted.clear()
    items = check(project, ".")[1]
    assert sorted(linted) == ["pkg/__init__.py", "pkg/models.py", "train.py"]
    assert ("train.py", 16, "GL501") in found(items)


def test_noqa_in_the_imported_module_applies(project: Path):
    text = textwrap.dedent(HELPERS).replace("w -= lr * w.grad", "w -= lr * w.grad  # noqa: GL101")
    (project / "helpers.py").write_text(text)
    assert ("helpers.py", 5, "GL101") not in found(check(project, "--no-cache", "train.py")[1])


# ------------------------------------------------------------------ import forms
FACTORY = "import torch\n\n\ndef make():\n    return torch.zeros(3, requires_grad=True)\n"


def _uses(importer: str, call: str) -> str:
    return f"import torch\n{importer}\n\n\ndef f():\n    v = {call}\n    v.add_(1)\n\n\nf()\n"


@pytest.mark.parametrize("files, script", [
    ({"a/b.py": FACTORY}, _uses("import a.b as c", "c.make()")),
    ({"a/__init__.py": "", "a/b.py": FACTORY}, _uses("from a.b import make", "make()")),
    ({"a/__init__.py": "", "a/b.py": FACTORY}, _uses("import a.b", "a.b.make()")),
    ({"a/__init__.py": "from .b import *\n", "a/b.py": FACTORY + "__all__ = ['make']\n"},
     _uses("from a import make", "make()")),
    ({"a/__init__.py": "from .b import make as build\n", "a/b.py": FACTORY},
     _uses("from a import build", "build()")),
    ({"a/__init__.py": "", "a/b.py": FACTORY}, _uses("from a import b", "b.make()")),
    ({"src/a/__init__.py": "", "src/a/b.py": FACTORY}, _uses("from a.b import make", "make()")),
    ({"a/b.py": FACTORY}, "import torch\n\n\ndef f():\n    from a.b import make\n    v = make()\n    v.add_(1)\n\n\nf()\n"),
], ids=["import-as", "from-import", "import-dotted", "star-all", "reexport-renamed", "from-package-import-module",
        "src-layout", "import-in-function"])
def test_import_forms(tmp_path: Path, files: Dict[str, str], script: str):
    proj = write_tree(tmp_path / "p", dict(files, **{"pyproject.toml": "", "main.py": script}))
    assert found(check(proj, "--no-cache", "main.py")[1]) == [("main.py", 7, "GL101")]


def test_relative_imports_inside_a_package(tmp_path: Path):
    proj = write_tree(tmp_path / "p", {
        "setup.py": "",
        "pkg/__init__.py": "",
        "pkg/factory.py": FACTORY,
        "pkg/train.py": _uses("from . import factory", "factory.make()").replace("\n\nf()\n", "\n"),
        "pkg/sub/__init__.py": "",
        "pkg/sub/run.py": _uses("from ..factory import make", "make()"),
    })
    assert found(check(proj, "--no-cache", ".")[1]) == [("pkg/sub/run.py", 7, "GL101"), ("pkg/train.py", 7, "GL101")]


def test_bases_and_methods_across_files(tmp_path: Path):
    """A trainer base class of another file whose methods the script calls in sequence; the
    model's base class from a third file."""
    proj = write_tree(tmp_path / "p", {
        ".git/HEAD": "",
        "base.py": """\
            import torch.nn as nn


            class Base(nn.Module):
                pass
            """,
        "model.py": """\
            import torch.nn as nn
            from base import Base


            class Net(Base):
                def __init__(self):
                    super().__init__()
                    self.fc = nn.Linear(3, 1)

                def forward(self, x):
                    return self.fc(x)
            """,
        "trainer.py": """\
            import torch


            class Trainer:
                def __init__(self, model):
                    self.model = model
                    self.opt = torch.optim.SGD(model.parameters(), lr=0.1)
                    self.losses = []

                def step(self, x):
                    self.opt.zero_grad()
                    loss = self.model(x).sum()
                    loss.backward()
                    self.opt.step()
                    self.losses.append(loss)
            """,
        "run.py": """\
            import torch
            from model import Net
            from trainer import Trainer

            t = Trainer(Net())
            for _ in range(3):
                t.step(torch.ones(2, 3))
            """,
    })
    rc, items = check(proj, "--no-cache", "run.py")
    assert [(p, c) for p, _, c in found(items)] == [("trainer.py", "GL501")], items


def test_import_cycles_end_in_unknown(tmp_path: Path):
    proj = write_tree(tmp_path / "p", {
        "pyproject.toml": "",
        "a.py": "import torch\nfrom b import g\nfrom a import f as again\n\n\ndef f(x):\n    return g(x)\n",
        "b.py": "import torch\nfrom a import f\n\n\ndef g(x):\n    return f(x)\n",
        "main.py": "import torch\nfrom a import f\nfrom b import *\n\nw = torch.ones(3, requires_grad=True)\nf(w)\n",
    })
    rc, items = check(proj, "--no-cache", ".")
    assert rc == 0 and items == []


def test_third_party_and_torch_stay_unknown(tmp_path: Path):
    """A project file named like a package the model knows is never taken for it."""
    proj = write_tree(tmp_path / "p", {
        "pyproject.toml": "",
        "numpy.py": "def array(x):\n    return x\n",
        "main.py": "import torch\nimport numpy as np\nimport requests\n\nw = torch.ones(3, requires_grad=True)\n"
                   "a = w.numpy()\nrequests.get(w)\n",
    })
    items = check(proj, "--no-cache", "main.py")[1]
    assert [c for _, _, c in found(items)] == ["GL201"]


def test_the_index_never_leaves_the_project(tmp_path: Path):
    write_tree(tmp_path, {"outside.py": FACTORY})
    proj = write_tree(tmp_path / "p", {"pyproject.toml": "", "main.py": _uses("from outside import make", "make()")})
    index = ProjectIndex(find_root(str(proj / "main.py")))
    assert index.resolve(str(proj / "main.py"), "outside") is None
    assert index.resolve(str(proj / "main.py"), "x", level=3) is None
    assert found(check(proj, "--no-cache", "main.py")[1]) == []


def test_roots(tmp_path: Path):
    write_tree(tmp_path, {"r/pyproject.toml": "", "r/pkg/__init__.py": "", "r/pkg/sub/__init__.py": "",
                          "r/pkg/sub/m.py": "", "loose/x.py": ""})
    assert find_root(str(tmp_path / "r/pkg/sub/m.py")) == str(tmp_path / "r")
    assert import_root(str(tmp_path / "r/pkg/sub")) == str(tmp_path / "r")
    assert find_root(str(tmp_path / "loose/x.py")) in (str(tmp_path / "loose"), str(Path("/")))


def test_each_file_is_parsed_once_per_process(project: Path, monkeypatch):
    import libcst

    from gradlint import index as index_module

    index_module._INDEXES.clear()
    parses: List[int] = []
    real = libcst.parse_module

    def counting(text, *a, **kw):
        parses.append(1)
        return real(text, *a, **kw)

    monkeypatch.setattr(libcst, "parse_module", counting)
    check(project, "--no-cache", "-j", "1", ".")
    assert len(parses) == 4  # train.py, helpers.py, pkg/__init__.py, pkg/models.py


def test_flake8_plugin_follows_imports(project: Path):
    flake8 = pytest.importorskip("flake8")
    del flake8
    r = subprocess.run([sys.executable, "-m", "flake8", "--select", "GL", "train.py"], cwd=project,
                       capture_output=True, text=True, timeout=300)
    lines = sorted(line.split(" ", 1)[0] + " " + line.split(" ", 2)[1] for line in r.stdout.splitlines())
    assert lines == ["train.py:16:9: GL501", "train.py:21:5: GL101"], r.stdout + r.stderr


def test_a_file_without_torch_tokens_that_imports_the_project_is_linted(tmp_path: Path):
    """The pre-filter skips text that names nothing of torch; a file importing a module of its
    project may still hold a bug made of what that module defines."""
    proj = write_tree(tmp_path / "p", {"pyproject.toml": "", "factory.py": FACTORY,
                                       "main.py": "from factory import make\n\nv = make()\nv.add_(1)\n"})
    assert found(check(proj, "--no-cache", "main.py")[1]) == [("main.py", 4, "GL101")]


def test_module_level_values_of_another_module(tmp_path: Path):
    """A module-level leaf tensor, model and optimizer of another module: known where they are
    imported (in function bodies too) and in that module's own functions."""
    proj = write_tree(tmp_path / "p", {
        "pyproject.toml": "",
        "models.py": MODELS,
        "params.py": """\
            import torch
            from models import Net

            W = torch.randn(3, requires_grad=True)
            model = Net()
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            for _ in range(2):  # a top-level loop does not run in the model
                W = W * 2


            def shrink():
                W.mul_(0.5)
            """,
        "train.py": """\
            import torch
            from params import W, model, opt, shrink


            def main():
                W.add_(1)
                shrink()
                for _ in range(3):
                    loss = model(torch.ones(2, 3)).sum()
                    loss.backward()
                    opt.step()


            main()
            """,
    })
    items = check(proj, "--no-cache", "train.py")[1]
    assert found(items) == [("params.py", 12, "GL101"), ("train.py", 6, "GL101"), ("train.py", 10, "GL601")]


def test_grad_mode_switched_off_by_an_import(tmp_path: Path):
    """A library module that calls torch.set_grad_enabled(False) at its top level switches
    autograd off in every program that imports it (also through a package's __init__.py): GL306
    at that statement, in the library's file, naming the import."""
    lib = {
        "pyproject.toml": "",
        "lib/__init__.py": "from .trainer import fit\n",
        "lib/trainer.py": "import torch\n\ntorch.set_grad_enabled(False)\n\n\ndef fit(model):\n    return model\n",
    }
    script = ("import torch\nfrom lib import fit\n\nw = torch.ones(3, requires_grad=True)\n"
              "loss = (w * 2).sum()\nloss.backward()\n")
    proj = write_tree(tmp_path / "p", dict(lib, **{"main.py": script}))
    items = check(proj, "--no-cache", "main.py")[1]
    assert ("lib/trainer.py", 3, "GL306") in found(items)
    (gl306,) = [i for i in items if i["code"] == "GL306"]
    assert "reached from main.py:2" in gl306["message"]
    # restored at its top level, or no backward after the import: nothing
    restored = dict(lib, **{"lib/trainer.py": lib["lib/trainer.py"] + "torch.set_grad_enabled(True)\n",
                            "main.py": script})
    proj2 = write_tree(tmp_path / "p2", restored)
    assert [c for _, _, c in found(check(proj2, "--no-cache", "main.py")[1])] == []
    proj3 = write_tree(tmp_path / "p3", dict(lib, **{"main.py": "import torch\nfrom lib import fit\n\nprint(fit(1))\n"}))
    assert found(check(proj3, "--no-cache", "main.py")[1]) == []


# ------------------------------------------------------------------ callers in other modules
INFER_MODELS = """\
    import torch
    import torch.nn as nn


    class Classifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 3)

        def forward(self, x):
            return self.fc(x)

        def predict(self, x):
            return (x @ self.fc.weight.t()).softmax(-1).numpy()

        def features(self, x):
            return (x @ self.fc.weight.t()).numpy()


    def infer(x):
        net = Classifier()
        return (x @ net.fc.weight.t()).numpy()
    """
INFER_CALLERS = """\
    import torch
    from models import Classifier, infer


    def evaluate(model, batches):
        out = []
        with torch.no_grad():
            for x in batches:
                out.append(model.predict(x))
        return out


    def score(model, x):
        return infer(x)


    @torch.inference_mode()
    def report(model, x):
        return score(model, x), model.predict(x)
    """


def test_inference_method_run_with_grad_off_by_every_caller_in_other_modules(tmp_path: Path):
    """A method or function whose body is linted with grad on by assumption: when every call of
    it in the project (by name, in any module; through callers of callers) runs under no_grad or
    inference_mode, its body is not reported; one caller with grad on, or a reference that may be
    called anywhere (a callback), keeps the finding. Without any caller, an inference-named
    method is a warning whose message says that its callers decide."""
    proj = write_tree(tmp_path / "p", {"pyproject.toml": "", "models.py": INFER_MODELS,
                                       "evaluate.py": INFER_CALLERS})
    assert found(check(proj, "--no-cache", "models.py")[1]) == [("models.py", 17, "GL201")]  # features: no caller
    items = check(proj, "--no-cache", ".")[1]
    assert found(items) == [("models.py", 17, "GL201")]
    assert items[0]["severity"] == "error"

    # the cache knows that models.py's result depends on its callers' modules (each run below in
    # a fresh index, as in a new process)
    from gradlint import index as index_module

    index_module._INDEXES.clear()
    assert found(check(proj, "models.py")[1]) == [("models.py", 17, "GL201")]
    index_module._INDEXES.clear()
    (proj / "serve.py").write_text("from models import Classifier\n\n\ndef serve(m, x):\n    return m.predict(x)\n")
    (proj / "evaluate.py").write_text(textwrap.dedent(INFER_CALLERS) + "\n# edited\n")
    items = check(proj, "models.py")[1]
    assert found(items) == [("models.py", 14, "GL201"), ("models.py", 17, "GL201")]
    predict = [i for i in items if i["line"] == 14][0]
    assert predict["severity"] == "warning" and "if `predict` runs with grad on" in predict["message"]

    # a reference that can be called anywhere
    cb = write_tree(tmp_path / "cb", {"pyproject.toml": "", "models.py": INFER_MODELS,
                                      "evaluate.py": INFER_CALLERS,
                                      "hooks.py": "def register(m, hooks):\n    hooks.append(m.predict)\n"})
    assert ("models.py", 14, "GL201") in found(check(cb, "--no-cache", "models.py")[1])
    # `infer` through `score`, a caller whose every caller runs with grad off; called once with grad on
    on = write_tree(tmp_path / "on", {"pyproject.toml": "", "models.py": INFER_MODELS,
                                      "evaluate.py": INFER_CALLERS + "\n\ndef train(m, x):\n    return score(m, x)\n"})
    assert ("models.py", 22, "GL201") in found(check(on, "--no-cache", "models.py")[1])
