"""Sphinx configuration of the clusterable documentation (``make docs``).

Pages are Markdown (myst-parser); the API reference is generated at build time into ``api/`` by
autosummary over every public module (``_templates/autosummary/module.rst``), each object
documented once, at the shortest public path that exports it (``_ext/api_reference.py``); the CLI
reference is sphinx-argparse over ``clusterable.cli.build_parser``; ``examples/*.py`` run at
build time through sphinx-gallery into ``auto_examples/``. ``make docs`` builds with
``-W --keep-going -n``: every warning is an error and every cross-reference must resolve.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import clusterable

# The local extension of _ext/: which public path documents each object, and the references.
sys.path.insert(0, str(Path(__file__).parent / "_ext"))

os.environ.setdefault("MPLBACKEND", "Agg")
# faiss announces at INFO which of its builds it loaded; the build log keeps to warnings.
logging.getLogger("faiss").setLevel(logging.WARNING)

project = "clusterable"
author = "the clusterable authors"
copyright = "2026, the clusterable authors"
release = version = clusterable.__version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    "sphinxarg.ext",
    "sphinx_gallery.gen_gallery",
    "api_reference",
]

# `name` in a docstring is a cross-reference to a Python object, as the docstrings write them;
# ``name`` is code.
default_role = "py:obj"
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
# results/** are the reproductions' own pages and figures: results.md links to their figures.
exclude_patterns = ["_build", "results/**", "auto_examples/*.ipynb", "auto_examples/*.py"]
templates_path = ["_templates"]

# Curly quotes and ellipses, but no dashes: "--" stays two hyphens, so that the flags of the
# command-line reference (its help text is prose, not code) read and copy as typed, never "–out".
smartquotes_action = "qe"

myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "deflist"]
myst_heading_anchors = 3

html_theme = "furo"
html_title = f"clusterable {release}"

# ---- API reference -----------------------------------------------------------------------------
autosummary_generate = True
# ``python -m clusterable`` runs the command line when imported: never import it.
autosummary_mock_imports = ["clusterable.__main__"]
autodoc_typehints = "signature"
autodoc_member_order = "bysource"
autodoc_default_options = {"show-inheritance": True}
napoleon_google_docstring = False
napoleon_numpy_docstring = True
# Types stay text: they describe shapes and array kinds ("(n, d) float array"), not only classes.
napoleon_use_param = False
napoleon_use_rtype = False
# An "Attributes" section reads as the "Parameters" one (types as text): autodoc documents the
# attributes themselves, and describing them twice would be a duplicate.
napoleon_custom_sections = [("Attributes", "params_style")]

# ---- every cross-reference resolves (-n), except the types of other libraries ------------------
# No network at build time, so no intersphinx inventories: the names of numpy, torch, scikit-learn,
# matplotlib, the standard library and typing are left as text, and only those.
nitpick_ignore_regex = [
    ("py:.*", r"(numpy|np|torch|nn|sklearn|scipy|matplotlib|optuna|faiss|PIL|pymanopt)(\..*)?"),
    ("py:.*", r"(Tensor|Module|Parameter|ndarray|DataLoader|Dataset|Sampler|Optimizer|Figure)"),
    (
        "py:.*",
        r"(typing|inspect|collections|os|pathlib|argparse|dataclasses|types|enum|abc)(\..*)?",
    ),
    ("py:.*", r"(Path|Any|Callable|Iterator|Iterable|Sequence|Mapping|Literal|Self|NoReturn)"),
    ("py:.*", r"(Axes|ArrayLike|NDArray|DTypeLike|PathLike|Namespace|ArgumentParser)"),
    ("py:.*", r"(contextlib|string)\..*"),
    # Our private modules (a part that starts with "_") are not in the reference: their types
    # show in public signatures as text.
    ("py:.*", r"clusterable(\.\w+)*\._\w+(\..*)?"),
    # Type variables of generic signatures: parameters of the signature, not objects.
    ("py:class", r"clusterable\.[\w.]+\.(T|LabelArray|SamplerClass)"),
]

# ---- examples gallery ---------------------------------------------------------------------------
sphinx_gallery_conf = {
    "examples_dirs": "../examples",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/",  # every example runs at build time
    "within_subsection_order": "FileNameSortKey",
    "download_all_examples": False,
    "remove_config_comments": True,
    "plot_gallery": True,
}
