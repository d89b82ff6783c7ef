"""The test table before training: what training added to the representation a run starts from.

Whoever fine-tunes a pretrained backbone asks first whether fine-tuning helped, and the retrieval
papers answer with the pretrained network's own features as their first row (Oh Song et al., CVPR
2016, Sec. 6: ImageNet GoogLeNet features before fine-tuning). ``clusterable train`` scores that
row itself, before the first step (``--before-training``, on by default), on the same test split,
the same training items for k-NN accuracy and the same clustering as the trained table
(:func:`clusterable.recipe.test_table_of`), and shows both side by side:

- an image backbone with pretrained weights (``timm:``, ``torchvision:`` with ``weights=``): its
  pooled features, each row l2-normalised (:func:`~clusterable.unsupervised.backbone_features`,
  the representation OPML clusters for photos, Sec. V-D);
- any other model: the raw inputs, flattened and l2-normalised
  (:func:`~clusterable.unsupervised.flat_features`, OPML's representation of Fashion-MNIST),
  where an item is at most :data:`RAW_WIDTH_LIMIT` numbers; a randomly initialised network's
  features describe no starting point worth a row.

The table is kept in the run folder (``before_training.json``, :class:`BeforeTraining`); a
resumed run reads it back rather than scoring it again.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from torch import nn

from clusterable._atomic import atomic_write_text
from clusterable.device import module_device
from clusterable.train.run_folder import BEFORE_TRAINING
from clusterable.unsupervised import backbone_features, flat_features

if TYPE_CHECKING:
    from clusterable.data import LabelledDataset
    from clusterable.recipe import RunSpec

#: The widest raw item (numbers an item) scored as the starting point: wider inputs are photos,
#: whose pixels no retrieval table starts from (a 64 x 64 colour image is 12,288 numbers).
RAW_WIDTH_LIMIT = 4_096


@dataclass(frozen=True)
class BeforeTraining:
    """The test table of where a run started.

    Attributes
    ----------
    representation : str
        What was scored, in words ("the pretrained features of timm:resnet50, 2048-d, each
        l2-normalised").
    metrics : dict of str to float
        The table, in the trained table's keys, fractions in [0, 1].
    """

    representation: str
    metrics: dict[str, float]

    def save(self, folder: str | Path) -> Path:
        """Write ``folder/before_training.json``; returns its path."""
        path = Path(folder) / BEFORE_TRAINING
        payload = {"representation": self.representation, "metrics": self.metrics}
        atomic_write_text(path, json.dumps(payload, indent=2))
        return path

    @classmethod
    def load(cls, folder: str | Path | None) -> BeforeTraining | None:
        """The table ``folder`` holds, or None where it holds none."""
        path = None if folder is None else Path(folder) / BEFORE_TRAINING
        if path is None or not path.is_file():
            return None
        payload = json.loads(path.read_text())
        metrics = {key: float(value) for key, value in payload["metrics"].items()}
        return cls(str(payload["representation"]), metrics)


def starts_pretrained(spec: RunSpec) -> bool:
    """Whether the run's model is an image backbone (``timm:``, ``torchvision:``) that starts
    from pretrained weights (``weights=PATH``)."""
    from clusterable.models import model_builder

    return model_builder(spec.model) is None and spec.model_args.get("weights") is not None


#: A representation of a data set's items: ``LabelledDataset`` of m items -> ``(m, d)`` rows.
Represent = Callable[["LabelledDataset"], np.ndarray]


def starting_representation(
    spec: RunSpec, model: nn.Module, input_shape: Sequence[int], progress: bool = False
) -> tuple[Represent, str] | None:
    """How the run's items are represented before training, and that in words; None where the
    run starts from nothing worth a row (a randomly initialised image backbone, raw items wider
    than :data:`RAW_WIDTH_LIMIT`).

    Parameters
    ----------
    spec : RunSpec
        The run: its model name and arguments say whether the backbone is pretrained.
    model : nn.Module
        The run's model before its first step, with a ``backbone`` (an ``EmbeddingNet``), on the
        run's device.
    input_shape : sequence of int
        One item's shape, ``(C, H, W)`` or ``(d,)``.
    progress : bool
        A progress bar while the backbone embeds a split.
    """
    from clusterable.models import model_builder

    backbone = getattr(model, "backbone", None)
    if starts_pretrained(spec) and isinstance(backbone, nn.Module):
        device = module_device(backbone)
        bar = "before training: pretrained features" if progress else None
        features = int(model.feature_dim)  # type: ignore[arg-type]  # an EmbeddingNet's int
        words = f"the pretrained features of {spec.model}, {features}-d, each l2-normalised"
        return lambda items: backbone_features(backbone, items, device, bar), words
    if model_builder(spec.model) is None:  # an image backbone without weights
        return None
    width = math.prod(input_shape)
    if width > RAW_WIDTH_LIMIT:
        return None
    return flat_features, f"the raw inputs, {width} numbers an item, each l2-normalised"
