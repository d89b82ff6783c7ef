"""Without the extras the core trains and evaluates, and each optional part names its extra."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from clusterable._optional import OPTIONAL, require

#: Runs before the snippet: every optional package fails to import, as on a bare install.
BLOCK = textwrap.dedent(
    f"""
    import importlib.abc, importlib.machinery, sys

    class Missing(importlib.abc.MetaPathFinder, importlib.abc.Loader):
        def find_spec(self, name, path=None, target=None):
            if name.partition(".")[0] in {sorted(OPTIONAL)!r}:
                return importlib.machinery.ModuleSpec(name, self)
            return None

        def create_module(self, spec):
            raise ModuleNotFoundError(f"No module named {{spec.name!r}}", name=spec.name)

        def exec_module(self, module):
            raise ModuleNotFoundError(f"No module named {{module.__name__!r}}")

    sys.meta_path.insert(0, Missing())
    """
)


def run_without_extras(snippet: str) -> subprocess.CompletedProcess:
    code = BLOCK + textwrap.dedent(snippet)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)


def test_the_core_trains_evaluates_and_clusters_without_any_extra():
    done = run_without_extras(
        """
        import numpy as np
        from clusterable.cluster import run_clustering
        from clusterable.data import load_dataset
        from clusterable.evaluate import evaluate_embeddings
        from clusterable.recipe import RunSpec, build_trainer
        from clusterable.train import TrainConfig, embed_dataset

        train = load_dataset("digits", split="train")
        config = TrainConfig(epochs=1, batch_size=60, eval_every=0, progress=False)
        trainer = build_trainer(RunSpec(loss="contrastive", embedding_dim=16), config, train)
        trainer.fit()
        emb, labels = embed_dataset(trainer.model, train)
        table = evaluate_embeddings(emb, labels)
        assert 0 < table["recall@1"] <= 1 and 0 < table["nmi"] <= 1
        assert len(run_clustering(emb[:300], "aas")) == 300  # 16-D: the brute-force graph
        for name in ("spectral", "kmeans"):
            assert len(run_clustering(emb[:300], name, n_clusters=10)) == 300
        print("core ok")
        """
    )
    assert done.returncode == 0, done.stderr
    assert "core ok" in done.stdout


def test_the_command_line_trains_without_any_extra(tmp_path):
    out = tmp_path / "run"
    done = run_without_extras(
        f"""
        from clusterable.cli import main
        argv = ["train", "--data", "digits", "--embedding-dim", "8", "--epochs", "1"]
        argv += ["--batch-size", "60", "--no-progress", "--no-report", "--out", {str(out)!r}]
        raise SystemExit(main(argv))
        """
    )
    assert done.returncode == 0, done.stderr
    assert (out / "test_metrics.json").is_file()


@pytest.mark.parametrize(
    ("snippet", "extra"),
    [
        ("import clusterable.plots", "plots"),
        ("import clusterable.reports", "plots"),
        (
            "from clusterable.cli import main\n"
            "raise SystemExit(main(['reproduce', 'aas-synthetic', '--quick']))",
            "plots",
        ),
        ("from clusterable.tsne import tsne_map; import numpy; tsne_map(numpy.eye(5))", "tsne"),
        (
            "from clusterable.unsupervised import OPML; import numpy as np\n"
            "OPML(metric_dim=2).fit(np.random.rand(60, 4), np.repeat(np.arange(3), 20))",
            "opml",
        ),
    ],
    ids=["plots", "reports", "reproduce", "tsne", "opml"],
)
def test_an_optional_part_names_its_extra(snippet, extra):
    done = run_without_extras(snippet)
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    # A library call raises ImportError; the command line prints one line of its own.
    assert last.startswith(("ImportError:", "clusterable reproduce: error:")), last
    assert f"pip install 'clusterable[{extra}]'" in last


def test_require_returns_the_module_or_says_what_needs_it():
    assert require("json", "reading JSON").dumps([1]) == "[1]"
    with pytest.raises(ImportError, match=r"the widget needs the optional package no_such_pkg"):
        require("no_such_pkg", "the widget")
