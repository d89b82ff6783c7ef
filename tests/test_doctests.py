"""Every ``>>>`` example in src/clusterable runs and prints what its docstring says.

One test per module. The examples run in one separate process for the whole session: some
change process-wide state as a user's code would (``register_clusterer`` adds a clusterer for
good), which must not leak into the other tests. A module whose import needs an optional extra
that is not installed (``clusterable[plots]``, ``[tune]``, ...) skips and names the missing
package; any other import error fails.
"""

from __future__ import annotations

import doctest
import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

SOURCE = Path(__file__).resolve().parents[1] / "src" / "clusterable"
OPTIONS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def _module_name(path: Path) -> str:
    parts = path.relative_to(SOURCE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = sorted(
    _module_name(path)
    for path in SOURCE.rglob("*.py")
    if ">>>" in path.read_text(encoding="utf-8") and path.name != "__main__.py"
)


def run_examples(names: list[str]) -> dict[str, tuple[str, str]]:
    """Module name -> ``(outcome, text)``: ``passed``, ``skipped`` (the reason) or ``failed``
    (doctest's report)."""
    results: dict[str, tuple[str, str]] = {}
    for name in names:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as error:
            if error.name is None or error.name.split(".")[0] == "clusterable":
                results[name] = ("failed", f"importing {name}: {error!r}")
            else:
                reason = f"{name} needs {error.name}, an optional extra that is not installed"
                results[name] = ("skipped", reason)
            continue
        tests = [t for t in doctest.DocTestFinder(exclude_empty=True).find(module) if t.examples]
        if not tests:
            results[name] = ("failed", f"{name} has '>>>' but no example doctest finds")
            continue
        runner = doctest.DocTestRunner(optionflags=OPTIONS)
        report: list[str] = []
        for test in tests:
            runner.run(test, out=report.append)
        failed = runner.summarize(verbose=False).failed
        results[name] = ("failed", "".join(report)) if failed else ("passed", "")
    return results


@pytest.fixture(scope="session")
def outcomes() -> dict[str, list[str]]:
    """Every module's examples, run once in a fresh interpreter."""
    done = subprocess.run(
        [sys.executable, __file__, *MODULES], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name: str, outcomes: dict[str, list[str]]) -> None:
    outcome, text = outcomes[name]
    if outcome == "skipped":
        pytest.skip(text)
    assert outcome == "passed", text


if __name__ == "__main__":
    print(json.dumps(run_examples(sys.argv[1:])))
