"""The package as users install it (issue 39): ``python -m build`` makes an sdist and a wheel; the
wheel holds the package and its metadata only; installed from the wheel (not editable) into a
fresh venv, ``clusterable --version`` says the project's version, every public module imports
(those of an extra only where that extra is absent) and ``clusterable demo --quick`` runs.

Marked ``wheel``: `make wheel-check` runs this module (about 4 minutes on two cores, most of it
installing torch and running the demo); `make test` leaves it out.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import zipfile
from email.parser import HeaderParser
from importlib.metadata import version
from pathlib import Path

import pytest

from clusterable import __version__
from clusterable._optional import OPTIONAL

pytestmark = pytest.mark.wheel

ROOT = Path(__file__).resolve().parents[2]
WHEEL = f"clusterable-{__version__}-py3-none-any.whl"
DIST_INFO = f"clusterable-{__version__}.dist-info/"

#: Run by the fresh venv's Python: imports every public module of the installed package (no
#: part of its dotted name starts with ``_``), found on disk by pkgutil, and prints
#: ``{module: "imported" | the missing optional package | the error}`` as JSON.
IMPORT_EVERY_MODULE = """
import importlib, json, pkgutil, sys
import clusterable

def public_modules(path, prefix):
    for info in pkgutil.iter_modules(path, prefix):
        base = info.name.rpartition(".")[2]
        if not base.startswith("_"):
            yield info.name
            if info.ispkg:
                yield from public_modules([f"{path[0]}/{base}"], info.name + ".")

def missing_package(error):
    while error is not None:
        if isinstance(error, ModuleNotFoundError):
            return error.name.partition(".")[0]
        error = error.__cause__
    return None

found = {"__file__": clusterable.__file__}
for name in public_modules(clusterable.__path__, "clusterable."):
    try:
        importlib.import_module(name)
        found[name] = "imported"
    except ImportError as error:
        found[name] = missing_package(error) or repr(error)
print(json.dumps(found))
"""


def run(command: list[str | Path], cwd: Path, timeout: int = 600) -> str:
    """Run ``command`` with no trace of this venv in its environment; its output, or a failure
    with the tail of its output."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    done = subprocess.run(
        [str(part) for part in command],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, f"{command}:\n{(done.stdout + done.stderr)[-3000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with what ``python -m build`` makes of this checkout (in an isolated build
    environment, as a user's or an index's build would)."""
    out = tmp_path_factory.mktemp("dist")
    run([sys.executable, "-m", "build", "--outdir", out, ROOT], cwd=out)
    return out


def pip_install(bin_dir: Path, *requirements: str) -> None:
    """Install ``requirements`` into the venv of ``bin_dir`` beside this venv's torch build (the
    Makefile's CPU wheel here): unpinned, torch would be PyPI's multi-GB CUDA build."""
    torch = f"torch=={version('torch')}"
    pip = [bin_dir / "python", "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    run([*pip, *requirements, torch], cwd=bin_dir)


@pytest.fixture(scope="module")
def venv(dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv holding the wheel and its runtime dependencies, no extra; its ``bin``."""
    home = tmp_path_factory.mktemp("venv")
    run([sys.executable, "-m", "venv", home], cwd=home)
    pip_install(home / "bin")  # torch first, alone
    pip_install(home / "bin", str(dist / WHEEL))
    return home / "bin"


def import_every_module(bin_dir: Path, cwd: Path) -> dict[str, str]:
    """``{module: outcome}`` of IMPORT_EVERY_MODULE in the venv of ``bin_dir``."""
    found = json.loads(run([bin_dir / "python", "-c", IMPORT_EVERY_MODULE], cwd=cwd))
    # The installed copy, not this checkout.
    assert Path(found.pop("__file__")).is_relative_to(bin_dir.parent)
    return found


def test_build_makes_an_sdist_and_a_wheel_of_the_version(dist: Path):
    assert sorted(p.name for p in dist.iterdir()) == [WHEEL, f"clusterable-{__version__}.tar.gz"]
    with zipfile.ZipFile(dist / WHEEL) as wheel:
        metadata = HeaderParser().parsestr(wheel.read(DIST_INFO + "METADATA").decode())
    assert metadata["Name"] == "clusterable" and metadata["Version"] == __version__


def test_the_sdist_holds_every_tracked_file_a_packager_tests_from(dist: Path):
    """Every test folder, the benchmarks, docs, examples and configs, as git tracks them: no
    generated site, cache or bytecode."""
    with tarfile.open(dist / f"clusterable-{__version__}.tar.gz") as sdist:
        names = {member.name.partition("/")[2] for member in sdist.getmembers() if member.isfile()}
    tracked = subprocess.run(
        ["git", "ls-files", "tests", "benchmarks", "docs", "examples", "configs", "src"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert set(tracked) - names == set()
    assert "tests/evaluate/test_neighbors.py" in names  # below the top level
    assert not [n for n in names if n.startswith("docs/_build/") or n.endswith(".pyc")]


def test_the_wheel_holds_the_package_and_its_metadata_only(dist: Path):
    with zipfile.ZipFile(dist / WHEEL) as wheel:
        members = wheel.namelist()
    # No tests/, docs/, benchmarks/, configs/, egg-info or venv: the package, then its metadata.
    assert [m for m in members if not m.startswith(("clusterable/", DIST_INFO))] == []
    package = {m for m in members if m.startswith("clusterable/")}
    modules = {
        p.relative_to(ROOT / "src").as_posix() for p in (ROOT / "src/clusterable").rglob("*.py")
    }
    # Every module of the source tree, and py.typed (PEP 561); no bundled data, no bytecode.
    assert package == modules | {"clusterable/py.typed"}


def test_the_installed_wheel_runs(dist: Path, venv: Path, tmp_path: Path):
    shown = run([venv / "clusterable", "--version"], cwd=tmp_path)
    assert shown == f"clusterable {__version__}\n"

    # Without extras every public module imports, but those that need an extra absent here.
    found = import_every_module(venv, tmp_path)
    needing = {name: outcome for name, outcome in found.items() if outcome != "imported"}
    assert all(package in OPTIONAL for package in needing.values()), needing
    print(f"\nwithout extras, {len(needing)} of {len(found)} public modules need one: {needing}")

    # With the figures' extra (the demo draws t-SNE maps), every one imports and the demo runs.
    pip_install(venv, f"{dist / WHEEL}[plots]")
    assert set(import_every_module(venv, tmp_path).values()) == {"imported"}
    run([venv / "clusterable", "demo", "--quick", "--out", "demo"], cwd=tmp_path)
    assert (tmp_path / "demo" / "results.md").is_file()
    assert (tmp_path / "demo" / "report.html").is_file()
