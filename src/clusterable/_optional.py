"""Optional dependencies: imported where they are used, with a message naming the extra to install.

The core (losses, training, evaluation, k-means, spectral and affinity-propagation clustering)
needs none of them. The extras, as ``pip install 'clusterable[NAME]'`` installs them:

- ``faiss``: faiss-cpu, faster exact kNN for large evaluations and AAS graphs in many dimensions
  (without it, a torch search gives the same neighbours);
- ``tsne``: openTSNE, the 2-D maps of plots and of OPML's pseudo-labels;
- ``opml``: pymanopt, OPML's Riemannian conjugate gradient (and openTSNE for its pseudo-labels);
- ``plots``: matplotlib, figures and HTML reports;
- ``tune``, ``export``, ``usps``, ``vision``: search, ONNX export, USPS's HDF5 file, pretrained
  image backbones;
- ``tensorboard``, ``mlflow``: experiment tracking beside ``log.jsonl``
  (:mod:`clusterable.train.loggers`).

``make setup`` (behind ``make demo`` and ``make test``) installs every one of them but
``vision`` and ``tensorboard``.
"""

from __future__ import annotations

import functools
import importlib
from types import ModuleType

#: Import name -> (distribution, extra) of each optional package.
OPTIONAL = {
    "faiss": ("faiss-cpu", "faiss"),
    "openTSNE": ("openTSNE", "tsne"),
    "pymanopt": ("pymanopt", "opml"),
    "matplotlib": ("matplotlib", "plots"),
    "optuna": ("optuna", "tune"),
    "onnx": ("onnx", "export"),
    "onnxscript": ("onnxscript", "export"),
    "onnxruntime": ("onnxruntime", "export"),
    "h5py": ("h5py", "usps"),
    "tensorboard": ("tensorboard", "tensorboard"),
    "mlflow": ("mlflow-skinny", "mlflow"),
}


@functools.cache
def installed(module: str) -> bool:
    """Whether ``module`` imports (a faster path is taken only then); asked once per process,
    so a missing package is not searched for again at every call."""
    try:
        importlib.import_module(module)
    except ImportError:
        return False
    return True


def require(module: str, needed_for: str) -> ModuleType:
    """Import ``module``, or raise an ImportError that says what needs it and how to install it.

    Examples
    --------
    >>> require("numpy", "arrays").__name__
    'numpy'
    """
    try:
        return importlib.import_module(module)
    except ImportError as error:
        top = module.partition(".")[0]
        distribution, extra = OPTIONAL.get(top, (top, None))
        how = f"pip install 'clusterable[{extra}]'" if extra else f"pip install {distribution}"
        raise ImportError(
            f"{needed_for} needs the optional package {distribution}, which is not installed: {how}"
        ) from error
