"""What users install is what the source tree holds: the wheel and the sdist built from a copy of
the tracked (and untracked, not ignored) files carry every module of ``gradlint/`` and ``rules/``
(the rules installed as ``gradlint.rules``). A hand-written package list once left
``gradlint.runtime.watchers`` out of the wheel, and runtime mode broke for every installed user."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _source_modules() -> set:
    """Every module of the source tree, by the path it has once installed."""
    found = {p.relative_to(ROOT).as_posix() for p in (ROOT / "gradlint").rglob("*.py")}
    found |= {"gradlint/rules/" + p.relative_to(ROOT / "rules").as_posix() for p in (ROOT / "rules").rglob("*.py")}
    return {name for name in found if "__pycache__" not in name}


def _copy_tree(dest: Path) -> Path:
    """The files a clean clone would have (tracked, plus untracked files git does not ignore)."""
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT,
                            capture_output=True, text=True)
    if listed.returncode != 0:
        pytest.skip("not a git checkout: " + listed.stderr.strip())
    for name in filter(None, listed.stdout.split("\0")):
        source = ROOT / name
        if source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    return dest


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("build")
    source = _copy_tree(tmp_path_factory.mktemp("src"))
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--sdist", "--wheel",
                           "--outdir", str(out), str(source)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return out


def test_the_wheel_has_every_module(built: Path):
    (wheel,) = built.glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    missing = sorted(_source_modules() - names)
    assert not missing, f"{wheel.name} lacks {missing}"
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    with zipfile.ZipFile(wheel) as archive:
        text = archive.read(entry_points).decode()
    assert "gradlint = gradlint.cli:main" in text and "gradlint.runtime.pytest_plugin" in text


def test_the_sdist_has_every_module_and_builds_the_same_wheel(built: Path, tmp_path: Path):
    (sdist,) = built.glob("*.tar.gz")
    with tarfile.open(sdist) as archive:
        members = [m.name.split("/", 1)[1] for m in archive.getmembers() if "/" in m.name]
        archive.extractall(tmp_path, filter="data") if sys.version_info >= (3, 12) else archive.extractall(tmp_path)
    expected = {name.replace("gradlint/rules/", "rules/", 1) for name in _source_modules()}
    missing = sorted(expected - set(members))
    assert not missing, f"{sdist.name} lacks {missing}"
    # a wheel built from the sdist (what pip does when no wheel fits) has every module too
    (unpacked,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    out = tmp_path / "from-sdist"
    done = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--wheel", "--outdir", str(out),
                           str(unpacked)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (wheel,) = out.glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        missing = sorted(_source_modules() - set(archive.namelist()))
    assert not missing, f"the wheel built from the sdist lacks {missing}"
