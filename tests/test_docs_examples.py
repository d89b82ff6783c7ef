"""Every example of the documentation runs (issue 39): each fenced ``python``, ``bash``, ``shell``
and ``console`` block of README.md and of docs/**/*.md (not the folders Sphinx and `reproduce`
generate), parsed by sybil, runs as a reader would run it.

A document's examples run in order, in sessions. A session is one fresh working folder, the
current directory of its shell and Python blocks, and one namespace that its Python blocks share.
It starts at the top of a document, and again at each comment

    <!-- examples: new session -->
    <!-- examples: new session, slow -->                 (a minute or more here: measured)
    <!-- examples: new session, slow, fashion-mnist -->  (reads Debian's Fashion-MNIST files)

Each session is one test, named by its document and the heading above it; ``slow`` marks it so
(`make test` leaves it to CI's ``-m slow`` run) and ``fashion-mnist`` skips it, saying why, where
those files are not installed. The folder holds copies of the checkout's ``configs/`` and
``docs/results/``, as the README's commands, run from the checkout, see them. Shell blocks run
under ``bash -euo pipefail`` with this venv's ``bin`` first on PATH, so ``clusterable`` is this
checkout's; a ``console`` block runs its ``$ `` lines. Sybil's ``<!-- skip: next -->`` leaves out
the next block where another test runs it; a block that cannot run here (a GPU, torchvision, your
own photos, `make` itself) is fenced ``text``, and the prose says what it needs.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from sybil import Example, Sybil
from sybil.parsers.markdown import CodeBlockParser, PythonCodeBlockParser, SkipParser

ROOT = Path(__file__).resolve().parents[1]
#: Folders of docs/ that hold generated pages (Sphinx's output and API stubs, the gallery's,
#: `clusterable reproduce`'s reports), not examples.
GENERATED = ("_build", "api", "auto_examples", "results")
#: What a session's folder holds of the checkout.
CHECKOUT_COPIES = ("configs", "docs/results")
SESSION = re.compile(r"<!-- examples: new session((?:, [a-z-]+)*) -->")
FLAGS = ("slow", "fashion-mnist")
FENCED = re.compile(r"^```.*?^```", re.M | re.S)


def documents() -> list[Path]:
    """README.md and every page of docs/, but the generated ones."""
    pages = [
        page
        for page in sorted((ROOT / "docs").rglob("*.md"))
        if page.relative_to(ROOT / "docs").parts[0] not in GENERATED
    ]
    return [ROOT / "README.md", *pages]


def run_shell(source: str) -> None:
    """Run ``source`` as a bash script in the current folder; a failure shows its output."""
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", source],
        env={**os.environ, "PATH": path},
        capture_output=True,
        text=True,
        check=False,
    )
    output = (done.stdout + done.stderr)[-4000:]
    assert done.returncode == 0, f"exit status {done.returncode} of\n{source}\n{output}"


def run_script(example: Example) -> None:
    run_shell(example.parsed)


def run_console(example: Example) -> None:
    run_shell("\n".join(line[2:] for line in example.parsed.splitlines() if line[:2] == "$ "))


EXAMPLES = Sybil(
    parsers=[
        SkipParser(),
        PythonCodeBlockParser(),
        CodeBlockParser("bash", run_script),
        CodeBlockParser("shell", run_script),
        CodeBlockParser("console", run_console),
    ]
)


@dataclass(frozen=True)
class Session:
    """The examples of ``document`` from character ``start`` to ``end``."""

    document: Path
    start: int
    end: int
    flags: tuple[str, ...]
    name: str

    def examples(self) -> Iterator[Example]:
        """This session's examples, in order, in a document parsed afresh (a new namespace)."""
        for example in EXAMPLES.parse(self.document):
            if self.start <= example.start < self.end:
                yield example


def sessions(document: Path) -> list[Session]:
    """The sessions of ``document`` that hold an example, each named after its heading."""
    text = document.read_text()
    marks = [(0, ())] + [
        (m.start(), tuple(m.group(1).split(", ")[1:])) for m in SESSION.finditer(text)
    ]
    starts = [example.start for example in EXAMPLES.parse(document)]
    found = []
    for (start, flags), (end, _) in zip(marks, [*marks[1:], (len(text), ())], strict=True):
        unknown = set(flags) - set(FLAGS)
        assert not unknown, f"{document.name}: unknown session flags {unknown}; known: {FLAGS}"
        if any(start <= position < end for position in starts):
            before = text[: next(p for p in starts if p >= start)]
            headings = re.findall(r"^#+ (.+)$", FENCED.sub("", before), re.M)
            title = headings[-1] if headings else "top"
            found.append(Session(document, start, end, flags, f"{document.name}: {title}"))
    return found


ALL_SESSIONS = [session for document in documents() for session in sessions(document)]


def write_image_folders(folder: Path) -> None:
    """The folders of images that the README's path from a trained model to use reads, as PNG
    files: ``queries/``, the first six Fashion-MNIST test images, and ``new-boots/``, the first
    three ankle boots (class 9) of its training split."""
    from PIL import Image

    from clusterable.data import load_dataset

    def write(split: str, rows: list[int], to: Path) -> None:
        items = load_dataset("fashion-mnist", split=split)
        to.mkdir()
        for row in rows:
            image, _ = items[row]
            pixels = (np.asarray(image).reshape(28, 28) * 255).round().astype(np.uint8)
            Image.fromarray(pixels).save(to / f"item{row}.png")

    write("test", list(range(6)), folder / "queries")
    boots = np.flatnonzero(load_dataset("fashion-mnist", split="train").labels == 9)[:3]
    write("train", boots.tolist(), folder / "new-boots")


def check_the_trained_model_outputs(folder: Path) -> None:
    """What the README's path from a trained model to use says it makes (formerly
    tests/test_readme.py): an index of the 10,000 test items, 3 boots added and 2 items removed,
    5 hits per query image, each query (a test item) its own nearest neighbour, and assigned
    clusters those fitted on the items."""
    from clusterable.archive import load_archive

    _, manifest = load_archive(folder / "fm-index.npz", "clusterable search index", 1, "")
    assert manifest["count"] == 10_000 + 3 - 2 and manifest["model"]
    hits = json.loads((folder / "hits.json").read_text())
    assert len(hits["queries"]) == 6 and all(len(q["neighbours"]) == 5 for q in hits["queries"])
    assert all(q["neighbours"][0]["distance"] < 1e-3 for q in hits["queries"])
    assigned = json.loads((folder / "assigned.json").read_text())
    fitted = np.load(folder / "clusters.npy")[:6]
    assert [item["cluster"] for item in assigned["items"]] == fitted.tolist()


#: What a session's folder needs beyond the checkout's copies, by session name.
INPUTS: dict[str, Callable[[Path], None]] = {
    "README.md: From a trained model to use": write_image_folders,
}
#: Checks of a session's outputs beyond running, by session name.
OUTPUT_CHECKS: dict[str, Callable[[Path], None]] = {
    "README.md: From a trained model to use": check_the_trained_model_outputs,
}


def test_every_input_and_output_check_names_a_session():
    names = {session.name for session in ALL_SESSIONS}
    assert set(INPUTS) <= names and set(OUTPUT_CHECKS) <= names


def test_sessions_are_found_with_their_flags(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "# Page\n\n```python\nx = 1\n```\n\n## Later\n\n<!-- examples: new session, slow -->\n"
        "```bash\ntrue\n```\n\n```text\nnot run\n```\n"
    )
    found = sessions(page)
    assert [(s.name, s.flags) for s in found] == [
        ("page.md: Page", ()),
        ("page.md: Later", ("slow",)),
    ]
    assert [e.parsed for s in found for e in s.examples()] == ["x = 1\n", "true\n"]


def session_param(session: Session) -> object:
    marks = [pytest.mark.slow] if "slow" in session.flags else []
    return pytest.param(session, id=session.name, marks=marks)


@pytest.mark.parametrize("session", [session_param(s) for s in ALL_SESSIONS])
def test_the_examples_run(session: Session, tmp_path, monkeypatch, request):
    if "fashion-mnist" in session.flags:
        request.getfixturevalue("fashion_mnist")  # skips, saying why, where it is absent
    for part in CHECKOUT_COPIES:
        shutil.copytree(ROOT / part, tmp_path / part)
    if session.name in INPUTS:
        INPUTS[session.name](tmp_path)
    monkeypatch.chdir(tmp_path)
    for example in session.examples():
        example.evaluate()
    if session.name in OUTPUT_CHECKS:
        OUTPUT_CHECKS[session.name](tmp_path)
