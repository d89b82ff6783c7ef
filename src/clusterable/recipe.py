"""A training run from a plain description: data, model, loss; what every run is built by.

:class:`RunSpec` names the pieces; :func:`build` makes the model, the loss and (MsDNN-AE) the
decoder from it after :func:`~clusterable.seeding.seed_everything`; :func:`build_trainer` puts
them into a :class:`~clusterable.train.Trainer` that stores the spec in every checkpoint. The CLI,
the demo, the reproductions, ``tune`` and the benchmarks all build through these two.
:func:`train_run` is ``clusterable train``: it also evaluates the best checkpoint on the test
split and writes ``run.json`` and ``test_metrics.json``; :func:`load_trained` rebuilds a trained
model from its checkpoint for ``evaluate``, ``embed`` and ``plot``.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Literal, NamedTuple, cast

import numpy as np
import torch
from torch import nn

from clusterable._atomic import atomic_write_text
from clusterable._ranges import SettingError
from clusterable.before_training import BeforeTraining, starting_representation, starts_pretrained
from clusterable.data import (
    ImageFiles,
    LabelledDataset,
    labelled_mask,
    load_dataset,
    stratified_split,
)
from clusterable.data.registry import standard_recall_ks
from clusterable.data.splits import check_enough_items
from clusterable.data.transforms import Preprocessing, backbone_preprocessing
from clusterable.device import DeviceSpec, module_device, resolve_device
from clusterable.evaluate import Evaluation, EvaluationOptions, evaluate_embeddings, knn_accuracy
from clusterable.losses import (
    AutoencoderLoss,
    CrossBatchMemory,
    EmbeddingLoss,
    OPMLLoss,
    available_losses,
    build_loss,
    loss_class,
)
from clusterable.metric_table import format_metric_table
from clusterable.mining import ClassBalancedBatchSampler, DistributedBatchSampler
from clusterable.models import (
    EmbeddingNet,
    available_models,
    build_decoder,
    build_model,
    model_argument_bounds,
    model_builder,
)
from clusterable.seeding import seed_everything
from clusterable.spec_rules import AUTOENCODER_BOUNDS, check_run_spec
from clusterable.train.answerable import Answerable, answerable_table, ks_within
from clusterable.train.batchnorm import check_freezable
from clusterable.train.callbacks import TrainerCallback
from clusterable.train.checkpoint import load_run_record, load_weights, resolve_checkpoint
from clusterable.train.config import (
    CLASSIFICATION_ACCURACY,
    TrainConfig,
    check_batches_exceed_dimensions,
    check_patience_has_validation,
)
from clusterable.train.config_typing import field_types, parameter_types, typed_settings
from clusterable.train.distributed import Distributed, setup_distributed
from clusterable.train.embed import embed_dataset
from clusterable.train.precision import resolve_precision
from clusterable.train.run_folder import (
    RUN_RECORD,
    TEST_METRICS,
    check_resume_epochs,
    clear_run_folder,
    prepare_run_folder,
)
from clusterable.train.trainer import Trainer, TrainResult
from clusterable.train.validation import classification_accuracy
from clusterable.unsupervised import (  # OPML: Algorithm 1 (RCGD on R, L), pseudo-labels
    OPMLDiagnostics,
    PseudoLabelRefresh,
    RiemannianOPMLLoss,
    backbone_features,
    with_pseudo_labels,
)

#: Training views of image files for a backbone: ``standard`` random resized crop and flip.
AUGMENTS = ("standard", "none")


@dataclass
class RunSpec:
    """What to train: the data, the model and the loss (training settings are a TrainConfig)."""

    data: str = "digits"  # the dataset: a registered name, folder:PATH or table:PATH
    root: str | None = None  # folder of the dataset's files (None: /usr/share/datasets/NAME,
    # then $XDG_CACHE_HOME/clusterable/NAME, ~/.cache without XDG_CACHE_HOME)
    labels: str = "fine"  # which labels train: fine (the dataset's classes) or coarse (MsDNN's
    # merged classes of a 10-class set: 0-4 -> 0, 5-9 -> 1; the fine classes then score
    # sub-class clustering)
    image_size: int | None = None  # image files are resized to this square (None: an image
    # backbone's input size, 224 by default; otherwise 64, folder images of 64 px or less kept)
    augment: str = "standard"  # image backbones' training view: standard (random resized crop
    # and flip, seeded) or none
    channels: int | None = None  # 1 (grayscale) or 3 (RGB); None: as folder images are, else 3
    loss: str = "lifted"  # the loss
    loss_args: dict[str, Any] = field(default_factory=dict)  # the loss's constructor keywords
    model: str = "mlp"  # the network: a registered model
    model_args: dict[str, Any] = field(default_factory=dict)  # the model's keywords
    embedding_dim: int = 128  # embedding size
    normalize: bool = False  # l2-normalise the embeddings the model outputs
    val_fraction: float = 0.1  # share of each training class held out for validation
    autoencoder: bool = False  # MsDNN-AE: a mirrored decoder (loss_args reconstruction_weight)
    unsupervised: bool = False  # OPML: train on pseudo-labels (t-SNE + AAS of the raw inputs; of
    # an image backbone's features for timm: and torchvision: models)
    pseudo_label_every: int = 0  # unsupervised: recompute pseudo-labels every E epochs (0: once)
    memory_size: int = 0  # XBM: past embeddings kept as extra partners of a pair loss (0: none)

    def __post_init__(self) -> None:
        typed = typed_settings(vars(self), field_types(type(self)), "run setting")
        for name, value in typed.items():
            setattr(self, name, value)
        # Model and loss arguments typed against what receives them ("16,32" becomes (16, 32),
        # margin="1e-1" becomes 0.1), then checked with the run settings: NaN or infinity is
        # refused here with the argument's range, the rest of the range by check_run_spec.
        builder = model_builder(self.model) if self.model in available_models() else None
        if builder is not None:  # a built-in model (a pretrained backbone has none)
            self.model_args = typed_settings(
                self.model_args,
                parameter_types(builder),
                f"model {self.model!r} argument",
                field="model_args",
                bounds=model_argument_bounds(self.model),
            )
        constructor = self._loss_class()
        if constructor is not None:
            self.loss_args = typed_settings(
                self.loss_args,
                parameter_types(constructor),
                f"loss {self.loss!r} argument",
                field="loss_args",
                bounds=getattr(constructor, "argument_bounds", None),
            )
        self.loss_args = typed_settings(
            self.loss_args,
            {"reconstruction_weight": float},
            "autoencoder argument",
            "loss_args",
            bounds=AUTOENCODER_BOUNDS,
        )
        check_run_spec(self, constructor)  # ranges, names, keywords: before any data
        if self.augment not in AUGMENTS:
            raise ValueError(f"augment must be one of {', '.join(AUGMENTS)}, got {self.augment!r}")
        # Paths are kept absolute, so that the run can be evaluated from any directory.
        kind, sep, path = self.data.partition(":")
        if sep and path:
            self.data = f"{kind}:{Path(path).expanduser().resolve()}"
        if self.root is not None:
            self.root = str(Path(self.root).expanduser().resolve())
        # A weights file named relative to where the run started is found from anywhere later
        # (resume, evaluate, embed), as the data and root are.
        weights = self.model_args.get("weights")
        if isinstance(weights, (str, os.PathLike)) and str(weights):
            self.model_args = {
                **self.model_args,
                "weights": str(Path(weights).expanduser().resolve()),
            }

    def _loss_class(self) -> type | None:
        if self.unsupervised and self.loss == "opml":
            return RiemannianOPMLLoss
        return loss_class(self.loss) if self.loss in available_losses() else None

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> RunSpec:
        """The spec of setting name -> value; an unknown name is an error naming the known ones."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(
                f"unknown run setting(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}"
            )
        return cls(**values)

    def load(self, split: str, preprocessing: Preprocessing | None = None) -> LabelledDataset:
        """The split of the data this spec names, with its label view and image settings.

        Image files fed to an image backbone (``timm:``, ``torchvision:``) take its
        ``preprocessing``, the run's view (:func:`run_preprocessing`; None: the installed
        library's, :func:`~clusterable.data.transforms.backbone_preprocessing`): its input size
        unless ``image_size`` says otherwise, and the evaluation view (resize, centre crop);
        :meth:`training_view` gives the training split its augmentation."""
        ds = load_dataset(
            self.data,
            root=self.root,
            split=split,
            labels=self.labels,
            image_size=self.image_size,
            channels=self.channels,
        )
        preprocessing = preprocessing or run_preprocessing(self)
        if preprocessing is None or not isinstance(ds.x, ImageFiles):
            return ds
        size = self.image_size or preprocessing.size
        return ds.replace(x=ds.x.replace(size=size, preprocessing=preprocessing))

    def training_view(self, train: LabelledDataset, seed: int) -> LabelledDataset:
        """``train`` with the backbone's seeded augmentation (``augment="standard"``); other
        data as it is."""
        x = train.x
        if self.augment == "none" or not isinstance(x, ImageFiles) or x.preprocessing is None:
            return train
        return train.replace(x=x.replace(augment_seed=seed))


def run_preprocessing(
    spec: RunSpec, record: Mapping[str, Any] | None = None, where: str = "the checkpoint"
) -> Preprocessing | None:
    """The view of a run's images (None: its model is no image backbone): the one its
    checkpoint's ``record`` (read from ``where``) stores, which wins over what the installed
    timm or torchvision would give now, so that upgrading them never changes how a run embeds;
    for a new run, and a run recorded before runs stored their view, the installed library's
    (:func:`~clusterable.data.transforms.backbone_preprocessing`)."""
    if record is None or "preprocessing" not in record:
        return backbone_preprocessing(spec.model)
    stored = record["preprocessing"]
    return None if stored is None else Preprocessing.from_record(stored, where)


def split_validation(
    train: LabelledDataset, fraction: float, seed: int
) -> tuple[LabelledDataset, LabelledDataset | None]:
    """Hold out ``fraction`` of each class of ``train`` (stratified, seeded) for validation."""
    if fraction <= 0:
        return train, None
    kept, held_out = stratified_split(train.labels, train_fraction=1.0 - fraction, seed=seed)
    return train.subset(kept), train.subset(held_out)


@dataclass
class Pieces:
    """What :func:`build` makes: the model, the loss, and the MsDNN-AE decoder (or None)."""

    model: EmbeddingNet
    loss: EmbeddingLoss
    decoder: nn.Module | None = None


def build(
    spec: RunSpec,
    input_shape: tuple[int, ...],
    num_classes: int,
    seed: int | None = None,
    preprocessing: Preprocessing | None = None,
) -> Pieces:
    """The model, the loss and (MsDNN-AE) the decoder ``spec`` describes, freshly initialised.

    Parameters
    ----------
    spec : RunSpec
    input_shape : tuple of int
        Shape of one item of the data they will see.
    num_classes : int
        Classes of the training labels (classification losses hold one weight row per class).
    seed : int, optional
        :func:`~clusterable.seeding.seed_everything` first, so that the same seed gives the same
        initial weights; None draws from the generators as they stand.
    preprocessing : Preprocessing, optional
        The run's view (:func:`run_preprocessing`), whose mean and std an image backbone
        normalises by; None: the installed library's.
    """
    loss_args = dict(spec.loss_args)
    # MsDNN-AE's lambda weighs the wrapper's term, not the inner loss.
    autoencoder_args = {}
    if "reconstruction_weight" in loss_args:
        if not spec.autoencoder:
            raise ValueError(
                "reconstruction_weight weighs the autoencoder's reconstruction term: add "
                "--autoencoder (YAML: autoencoder: true), or leave the weight out"
            )
        autoencoder_args["weight"] = loss_args.pop("reconstruction_weight")
    if seed is not None:
        seed_everything(seed)
    model = build_model(
        spec.model,
        input_shape,
        spec.embedding_dim,
        normalize=spec.normalize,
        preprocessing=preprocessing,
        **spec.model_args,
    )
    loss: EmbeddingLoss
    if spec.unsupervised and spec.loss == "opml":
        loss = RiemannianOPMLLoss(embedding_dim=spec.embedding_dim, **loss_args)
    else:
        loss = build_loss(
            spec.loss, num_classes=num_classes, embedding_dim=spec.embedding_dim, **loss_args
        )
    if spec.memory_size:
        loss = CrossBatchMemory(loss, spec.memory_size, spec.embedding_dim)
    decoder = None
    if spec.autoencoder:
        decoder = build_decoder(spec.model, input_shape, spec.embedding_dim, **spec.model_args)
        loss = AutoencoderLoss(loss, decoder, **autoencoder_args)
    return Pieces(model, loss, decoder)


def build_trainer(
    spec: RunSpec,
    config: TrainConfig,
    train: LabelledDataset,
    val: LabelledDataset | None = None,
    *,
    num_classes: int | None = None,
    out: Path | None = None,
    preprocessing: Preprocessing | None = None,
) -> Trainer:
    """A :class:`~clusterable.train.Trainer` of the pieces ``spec`` describes, seeded by
    ``config.seed``; every checkpoint it writes records the spec and the run's view of its
    images, so :func:`load_trained` rebuilds its model and its view.

    ``num_classes``: the classes the loss holds weights for (default: ``train``'s);
    ``preprocessing``: the view ``train`` was read in (:func:`run_preprocessing`; None: the
    installed library's).
    """
    num_classes = train.num_classes if num_classes is None else num_classes
    preprocessing = preprocessing or run_preprocessing(spec)
    pieces = build(spec, train.input_shape, num_classes, config.seed, preprocessing)
    check_batches_exceed_dimensions(config, spec.embedding_dim, pieces.loss)
    record = {
        "spec": asdict(spec),
        "input_shape": list(train.input_shape),
        "num_classes": num_classes,
        "preprocessing": None if preprocessing is None else preprocessing.to_record(),
    }
    callbacks: list[TrainerCallback] = []
    if spec.unsupervised and spec.pseudo_label_every:
        callbacks.append(PseudoLabelRefresh(spec.pseudo_label_every))
    if spec.unsupervised and isinstance(pieces.loss, OPMLLoss):
        callbacks.append(OPMLDiagnostics(pieces.loss))
    return Trainer(
        pieces.model,
        pieces.loss,
        train,
        val,
        config=config,
        out=out,
        record=record,
        callbacks=callbacks,
    )


#: The neighbour counts of the test table: Recall@K, and k of the k-NN classifier.
TEST_RECALL_KS, TEST_KNN_KS = (1, 2, 4, 8), (1, 3, 5, 7)
#: How a note under a table begins where k-NN accuracy from training items is left out; the
#: reason follows (:func:`knn_left_out_reason` reads it back).
KNN_LEFT_OUT = "k-NN accuracy from training items left out: "
#: Under the table of a zero-shot test split, whose k-NN accuracy from training items would be 0.
ZERO_SHOT_NOTE = f"{KNN_LEFT_OUT}no test class is a training class (zero-shot)"
#: The clustering scores against the fine classes that a coarse-label table adds (``subclass_*``).
SUBCLASS_SCORES = ("nmi", "accuracy", "f1")


def knn_left_out_reason(note: str) -> str:
    """Why a note beginning :data:`KNN_LEFT_OUT` leaves the k-NN accuracy out."""
    return note.removeprefix(KNN_LEFT_OUT)


def training_items(spec: RunSpec, train_split: LabelledDataset, seed: int) -> LabelledDataset:
    """The items a run trains on, the reference set of its test table's k-NN accuracy: its
    ``train_split`` less the validation items :func:`split_validation` holds out with ``seed``;
    the whole split for an unsupervised run, which holds none out (true labels: they only
    evaluate)."""
    if spec.unsupervised:
        return train_split
    return split_validation(train_split, spec.val_fraction, seed)[0]


def describe_knn(training: int, held_out: int) -> str:
    """The note under a table with k-NN accuracy from ``training`` items: which items vote, and
    the tie rule (`clusterable.evaluate.knn_accuracy`; ``classify`` breaks ties otherwise)."""
    which = (
        f"the train split less its {held_out} validation items" if held_out else "the train split"
    )
    return (
        f"k-NN accuracy: each item takes the majority class of its K nearest among the run's "
        f"{training} training items ({which}); a tie goes to the class of the nearest voter"
    )


def knn_to_report(
    train_labels: np.ndarray, test_labels: np.ndarray
) -> tuple[tuple[int, ...], str | None]:
    """The k of the test table's k-NN accuracy of the labelled ``test_labels`` ``(m,)`` from
    training items labelled ``train_labels`` ``(n,)`` (the same class codes):
    :data:`TEST_KNN_KS` up to ``n``, none where no test class is a training class (zero-shot);
    with the note that says what was left out (None: nothing)."""
    if not np.isin(test_labels, train_labels).any():
        return (), ZERO_SHOT_NOTE
    return ks_within(TEST_KNN_KS, len(train_labels), name="k-NN accuracy")


def table_to_report(
    train: LabelledDataset, test: LabelledDataset, recall_ks: Sequence[int] = TEST_RECALL_KS
) -> tuple[Answerable, tuple[int, ...]]:
    """What the test table reports: the evaluation it can answer and the k-NN ks, those a few
    photos per class cannot answer left out, with the notes that say so under the table."""
    keep = labelled_mask(test.labels)
    gallery = None if test.is_query is None else int((~test.is_query[keep]).sum())
    table = answerable_table(test.labels[keep], recall_ks, candidates=gallery)
    knn_ks, knn_note = knn_to_report(train.labels, test.labels[keep])
    if knn_note is not None:
        table.notes.append(knn_note)
    return table, knn_ks


class KnnReference(NamedTuple):
    """The reference items of k-NN accuracy (the run's training items), embedded.

    Attributes
    ----------
    embeddings : np.ndarray
        ``(n, d)`` embeddings of the training items.
    labels : np.ndarray
        ``(n,)`` their labels.
    ks : tuple of int
        The k to report (:func:`knn_to_report`).
    item_labels : np.ndarray, optional
        ``(m,)`` the evaluated items' labels in the codes of ``labels``, where the items number
        their classes otherwise (another data set's, matched by class name); None: the items'
        own labels are in these codes.
    """

    embeddings: np.ndarray
    labels: np.ndarray
    ks: tuple[int, ...]
    item_labels: np.ndarray | None = None


def score_test_table(
    emb: np.ndarray,
    labels: np.ndarray,
    table: Answerable,
    seed: int,
    *,
    knn: KnnReference | None = None,
    fine_labels: np.ndarray | None = None,
    queries: np.ndarray | None = None,
    clustering: str = "kmeans",
    n_clusters: int | Literal["auto"] | None = None,
    device: DeviceSpec = "auto",
    clustering_options: dict[str, Any] | None = None,
    classifier: EmbeddingLoss | None = None,
) -> Evaluation:
    """The test table of the labelled items ``emb`` ``(m, d)``, ``labels`` ``(m,)``: what
    ``table`` asks of :func:`~clusterable.evaluate.evaluate_embeddings`, then ``knn@K``, k-NN
    accuracy from the training items of ``knn`` for each of its ks, and, with ``knn`` (the items
    are of the training classes), ``classification_accuracy`` of the run's trained loss
    ``classifier`` where it predicts classes (cross-entropy, center, COREL), then, where
    ``fine_labels`` ``(m,)`` hold more classes than ``labels`` (a coarse label view),
    ``subclass_nmi``, ``subclass_accuracy`` and ``subclass_f1``: the same clustering method
    (k = the fine classes, its own ``clustering_options`` too) scored against the fine classes.

    The one place a run's test table is computed: ``clusterable train``'s
    (:func:`evaluate_on_test`) and ``clusterable evaluate RUN``'s. ``table.metrics`` empty asks
    none of the registry's (``evaluate --metrics knn@3``)."""
    metrics = Evaluation()
    if table.metrics != []:
        metrics = evaluate_embeddings(
            emb,
            labels,
            metrics=table.metrics,
            clustering=clustering,
            n_clusters=n_clusters,
            ks=table.ks,
            seed=seed,
            queries=queries,
            device=device,
            options=EvaluationOptions(cluster_kwargs=clustering_options),
        )
    if knn is not None:
        truth = labels if knn.item_labels is None else knn.item_labels
        for k in knn.ks:
            metrics[f"knn@{k}"] = knn_accuracy(
                knn.embeddings, knn.labels, emb, truth, k=k, device=device
            )
        if classifier is not None:
            alone = Distributed(device=resolve_device(device))  # every process scores it all
            accuracy = classification_accuracy(classifier, emb, truth, alone)
            if accuracy is not None:
                metrics[CLASSIFICATION_ACCURACY] = accuracy
    if fine_labels is not None and len(set(fine_labels.tolist())) > len(set(labels.tolist())):
        fine_table = evaluate_embeddings(
            emb,
            fine_labels,
            metrics=SUBCLASS_SCORES,
            clustering=clustering,
            seed=seed,
            device=device,
            options=EvaluationOptions(cluster_kwargs=clustering_options),
        )
        for name in SUBCLASS_SCORES:
            metrics[f"subclass_{name}"] = fine_table[name]
    return metrics


def evaluate_on_test(
    model: nn.Module,
    train: LabelledDataset,
    test: LabelledDataset,
    seed: int,
    recall_ks: Sequence[int] = TEST_RECALL_KS,
    classifier: EmbeddingLoss | None = None,
) -> Evaluation:
    """The evaluation table on the test split, k-NN accuracy (k = 1, 3, 5, 7) from the training
    items ``train`` (with the trained ``classifier``'s accuracy where it predicts classes), and,
    when labels are coarse, clustering scores against the fine classes (sub-class NMI):
    :func:`test_table_of` the model's embeddings.

    Everything runs where the model is (the run's device)."""
    return test_table_of(
        lambda items: embed_dataset(model, items)[0],
        train,
        test,
        seed,
        recall_ks,
        device=module_device(model),
        classifier=classifier,
    )


def test_table_of(
    represent: Callable[[LabelledDataset], np.ndarray],
    train: LabelledDataset,
    test: LabelledDataset,
    seed: int,
    recall_ks: Sequence[int] = TEST_RECALL_KS,
    *,
    device: DeviceSpec = "auto",
    classifier: EmbeddingLoss | None = None,
) -> Evaluation:
    """The test table (:func:`score_test_table`) of the items as ``represent`` gives them
    (``LabelledDataset`` of m items -> ``(m, d)`` rows): a trained model's embeddings, or the
    representation a run starts from (:mod:`clusterable.before_training`).

    A test split with query and gallery roles (``test.is_query``: In-Shop) is scored as its
    protocol says: each query ranks the gallery; the clustering scores cover every test item.
    The training items are represented only where the table has k-NN accuracy (not for a
    zero-shot test split). Searches and clustering run on ``device``."""
    test_emb = represent(test)
    keep = labelled_mask(test.labels)
    table, knn_ks = table_to_report(train, test, recall_ks)
    knn = None
    if knn_ks:
        knn = KnnReference(represent(train), train.labels, knn_ks)
    return score_test_table(
        test_emb[keep],
        test.labels[keep],
        table,
        seed,
        knn=knn,
        fine_labels=test.fine_labels[keep],
        queries=None if test.is_query is None else test.is_query[keep],
        device=device,
        classifier=classifier,
    )


def score_before_training(
    spec: RunSpec,
    model: nn.Module,
    reference: LabelledDataset,
    test: LabelledDataset,
    seed: int,
    recall_ks: Sequence[int],
    progress: bool = False,
) -> BeforeTraining | None:
    """The test table of the representation the run starts from
    (:func:`~clusterable.before_training.starting_representation`), scored as the trained table
    will be (:func:`test_table_of`: the same test items, k-NN voters ``reference`` and
    clustering), on the model's device; None where the run starts from nothing worth a row.
    ``progress``: a progress bar while a backbone embeds."""
    start = starting_representation(spec, model, test.input_shape, progress)
    if start is None:
        return None
    represent, words = start
    metrics = test_table_of(
        represent, reference, test, seed, recall_ks, device=module_device(model)
    )
    return BeforeTraining(words, dict(metrics))


def pseudo_label_features(
    spec: RunSpec,
    config: TrainConfig,
    train: LabelledDataset,
    preprocessing: Preprocessing | None,
) -> np.ndarray | None:
    """What an unsupervised run clusters into its first pseudo-labels (OPML's Algorithm 1, line
    2): for an image backbone (``timm:``, ``torchvision:``) its features of the training items
    (:func:`~clusterable.unsupervised.backbone_features`), from the weights the run starts from
    (a resumed run's too), on the run's device; None for a built-in model: the raw inputs, the
    paper's representation of Fashion-MNIST. Raw photos would be ``3 x 224 x 224`` numbers an
    item, 3.5 GB for CUB's 5,864 before t-SNE."""
    if model_builder(spec.model) is not None:
        return None
    pieces = build(spec, train.input_shape, train.num_classes, config.seed, preprocessing)
    env = setup_distributed(config.device)  # the Trainer's own
    progress = "pseudo-label features" if config.progress and env.is_main else None
    return backbone_features(pieces.model.backbone, train, env.device, progress=progress)


def describe_unlabelled_end(spec: RunSpec, out: Path | None) -> str:
    """What a run on unlabelled items prints where a test table would be: why there is none, and
    how to cluster the items with the trained model."""
    run = out if out is not None else "RUN"
    items = spec.data.partition(":")[2] or "PATH"
    return "\n".join(
        [
            f"\nno test table: {spec.data} has no classes to score against. With the model:",
            f"  clusterable cluster {run}  # its items' clusters",
            f"  clusterable embed {run} --items {items} --out EMB",
            "  clusterable cluster EMB/embeddings.npy --save CLUSTERS.npz",
            "  clusterable report CLUSTERS.npz --embeddings EMB/embeddings.npy  # their items",
        ]
    )


def describe_start(
    spec: RunSpec,
    config: TrainConfig,
    train: LabelledDataset,
    sizes: dict[str, int],
    loss: nn.Module,
    sampler: DistributedBatchSampler,
    device: torch.device,
    out: Path | None,
    resume: bool,
) -> str:
    """The banner a run prints before its first step: what it trains on, with what (the
    batches ``sampler`` draws), where."""
    counts = ", ".join(f"{name} {n}" for name, n in sizes.items())
    labels = f"{spec.labels} labels"
    if spec.unsupervised:
        of = "raw inputs" if model_builder(spec.model) is not None else "backbone's features"
        labels = f"pseudo-labels of t-SNE + AAS of the {of}"
    loss_args = ", ".join(f"{k}={v}" for k, v in spec.loss_args.items())
    lines = [
        f"data      {spec.data} ({labels}, {train.num_classes} classes, items of "
        f"shape {train.input_shape}): {counts} items",
        f"files     {train.source or 'in memory'}",
        f"model     {spec.model}"
        + "".join(f", {k}={v}" for k, v in spec.model_args.items())
        + (
            ", RANDOM initial weights (no --model-arg weights=PATH; nothing is downloaded)"
            if model_builder(spec.model) is None and "weights" not in spec.model_args
            else ""
        )
        + f", {spec.embedding_dim}-d embeddings"
        + (", l2-normalised" if spec.normalize else "")
        + (", with a decoder (autoencoder)" if spec.autoencoder else ""),
        f"loss      {spec.loss} ({type(loss).__name__}{': ' + loss_args if loss_args else ''})",
        (
            f"training  {config.epochs} epoch{'' if config.epochs == 1 else 's'}, "
            f"{_describe_batches(config, sampler)}, "
            f"{config.optimizer} lr {config.lr:g}, seed {config.seed}, on {device}"
            if config.epochs or resume
            else "training  none (epochs 0): the embedding is the backbone's features as they "
            f"are, l2-normalised, on {device}"
        ),
        f"output    {out if out is not None else 'nothing written (no run folder)'}"
        + (" (resuming)" if resume else ""),
    ]
    return "\n".join(lines)


def _describe_batches(config: TrainConfig, sampler: DistributedBatchSampler) -> str:
    """The batches as drawn: ``batch 128 (random)``, or for a sampler of classes its classes
    and items, and where whole classes round ``batch_size`` down, that they do (10 classes of
    digits at batch_size 128 and 4 items per class: 10 classes x 12 items, 120)."""
    if not isinstance(sampler, ClassBalancedBatchSampler):
        return f"batch {sampler.batch_size} ({config.sampler})"
    drawn = f"{sampler.classes_per_batch} classes x {sampler.items_per_class} items"
    if sampler.batch_size != config.batch_size:
        drawn += f": batch_size {config.batch_size} rounded down to whole classes"
    smallest = min(len(members) for members in sampler.members.values())
    if smallest < sampler.items_per_class:  # the sampler fills up with repeats
        drawn += (
            f"; the smallest class has {smallest} training items, so its items repeat within "
            "a batch"
        )
    return f"batch {sampler.batch_size} ({config.sampler}, {drawn})"


def check_before_data(spec: RunSpec, config: TrainConfig) -> None:
    """Refuse, before the run folder is touched or any data read, the training settings that
    this machine or the model cannot run: a device it lacks, a precision the device cannot
    train in (fp16 off CUDA), and frozen BatchNorm for a model registered without any. The
    trainer resolves the same settings again when built (under torchrun, each process its GPU)."""
    resolve_precision(config.precision, resolve_device(config.device), amp=config.amp)
    if config.freeze_batchnorm:
        check_freezable(spec.model)
    if config.epochs == 0 and not starts_pretrained(spec):
        start = "random weights" if model_builder(spec.model) is None else "its own random weights"
        reason = (
            f"trains nothing: the run would keep the starting model, and {spec.model} starts "
            f"from {start}; give a timm: or torchvision: backbone with --model-arg "
            "weights=PATH (its features, as they are), or 1 epoch or more"
        )
        raise SettingError("training setting", "epochs", 0, reason)


def untrained_spec(
    spec: RunSpec,
    input_shape: tuple[int, ...],
    num_classes: int,
    preprocessing: Preprocessing | None,
) -> RunSpec:
    """The spec of a run that trains nothing (``epochs`` 0): its embedding is the pretrained
    backbone's features, l2-normalised (the representation the run would start from,
    :mod:`clusterable.before_training`), through a head of their width that
    :func:`identity_head` makes the identity.

    Raises
    ------
    SettingError
        Where ``embedding_dim`` was set to another width than the features' (its default
        gives way to theirs).
    """
    width = build(spec, input_shape, num_classes, preprocessing=preprocessing).model.feature_dim
    default = RunSpec.__dataclass_fields__["embedding_dim"].default
    if spec.embedding_dim not in (default, width):
        reason = (
            f"with epochs 0 the embedding is {spec.model}'s own {width} features; drop the "
            "embedding size, or train 1 epoch or more"
        )
        raise SettingError("run setting", "embedding_dim", spec.embedding_dim, reason)
    return replace(spec, embedding_dim=width, normalize=True)


def identity_head(model: nn.Module) -> None:
    """Make the head of ``model`` (an :class:`~clusterable.models.EmbeddingNet`, as every
    ``timm:`` and ``torchvision:`` model is, whose head is as wide as its features) the
    identity: weight ``I``, bias 0."""
    head = cast(nn.Linear, model.get_submodule("head"))
    with torch.no_grad():
        head.weight.copy_(torch.eye(*head.weight.shape))  # (width, width)
        head.bias.zero_()


def train_run(
    spec: RunSpec,
    config: TrainConfig,
    out: Path | str | None = None,
    resume: bool = False,
    overwrite: bool = False,
) -> tuple[TrainResult, dict[str, float]]:
    """Train as ``spec`` and ``config`` say; returns the training result and the test metrics.

    The run folder ``out`` is checked first
    (:func:`~clusterable.train.run_folder.prepare_run_folder`: a new run needs it empty, or
    ``overwrite``; ``resume`` needs a run in it), then the data is loaded and every piece built,
    all before the first training step; ``overwrite`` deletes what ``out`` held only then, so a
    run refused before keeps the old one. With ``config.verbose``, a banner says what is trained,
    on what and where. Training, the test embeddings and their evaluation all run on
    ``config.device``.
    """
    check_before_data(spec, config)
    main_process = os.environ.get("RANK", "0") == "0"
    if out is not None:
        out = Path(out)
        if main_process:  # one process checks and clears; the others only write as told
            prepare_run_folder(out, resume=resume, overwrite=overwrite)
            if resume:  # before run.json is written again
                check_resume_epochs(out, config.epochs)
    # Before the data: an unsupervised run, or val_fraction 0, holds no validation split.
    check_patience_has_validation(config, not spec.unsupervised and spec.val_fraction > 0)
    # A resumed run keeps the view its checkpoints stored, whatever the libraries give now.
    resumed = resolve_checkpoint(out) if resume and out is not None else None
    record = None if resumed is None else load_run_record(resumed)
    preprocessing = run_preprocessing(spec, record, str(resumed))
    full_train = spec.load("train", preprocessing)
    # Unlabelled items (a folder without class folders, a table without labels) have no test
    # split: an unsupervised run trains on every one of them and scores nothing.
    unlabelled = spec.unsupervised and not labelled_mask(full_train.labels).any()
    test = None if unlabelled else spec.load("test", preprocessing)
    if spec.unsupervised:
        # Labels only evaluate: no validation split (it would pick checkpoints by true labels).
        features = pseudo_label_features(spec, config, full_train, preprocessing)
        train, val = with_pseudo_labels(full_train, features, seed=config.seed), None
    else:
        train, val = split_validation(full_train, spec.val_fraction, config.seed)
    check_enough_items(spec.data, train, val, test, spec.val_fraction)  # a few photos per class
    untrained = config.epochs == 0 and not resume
    if untrained:
        spec = untrained_spec(spec, full_train.input_shape, full_train.num_classes, preprocessing)
    train = spec.training_view(train, config.seed)
    trainer = build_trainer(
        spec,
        config,
        train,
        val,
        num_classes=full_train.num_classes,
        out=out,
        preprocessing=preprocessing,
    )
    if untrained:
        identity_head(trainer.model)
    if out is not None and overwrite and main_process:
        clear_run_folder(out)
    if config.verbose and trainer.env.is_main:
        sizes = {"train": len(train), "validation": len(val) if val else 0}
        sizes["test"] = 0 if test is None else len(test)
        print(
            describe_start(
                spec,
                config,
                train,
                sizes,
                trainer.loss,
                trainer.sampler,
                trainer.env.device,
                out,
                resume,
            )
        )
        sys.stdout.flush()
    if out is not None and trainer.env.is_main:
        atomic_write_text(
            out / RUN_RECORD,
            json.dumps({"spec": asdict(spec), "config": config.to_dict()}, indent=2),
        )
    recall_ks = standard_recall_ks(spec.data) or TEST_RECALL_KS
    reference = training_items(spec, full_train, config.seed)  # as `evaluate RUN` rebuilds them
    before = None
    # A run that trains nothing (epochs 0) is the starting point itself: its table is the one.
    if test is not None and config.before_training and not untrained:
        before = BeforeTraining.load(out) if resume else None
        if before is None:
            shown = config.progress and trainer.env.is_main
            before = score_before_training(
                spec, trainer.model, reference, test, config.seed, recall_ks, shown
            )
            if before is not None and out is not None and trainer.env.is_main:
                before.save(out)
    result = trainer.fit(resume=resume)
    if result.checkpoint is not None:
        load_weights(result.checkpoint, trainer.model, trainer.loss)
    if test is None:
        if config.verbose and trainer.env.is_main:
            print(describe_unlabelled_end(spec, out))
        return result, Evaluation()
    metrics = evaluate_on_test(
        trainer.model,
        reference,
        test,
        config.seed,
        recall_ks,
        classifier=None if untrained else trainer.loss,  # a classifier of no training: random
    )
    if out is not None and trainer.env.is_main:
        atomic_write_text(out / TEST_METRICS, json.dumps(metrics, indent=2))
    trainer.log_after_fit({"event": "test", **metrics})
    if config.verbose and trainer.env.is_main:
        labelled = int(labelled_mask(test.labels).sum())
        checkpoint = result.checkpoint.name if result.checkpoint else "the final model"
        heading = f"\ntest split of {spec.data}: {labelled} items, {checkpoint}"
        if metrics.partition is not None:
            heading += (
                f"; clustering: k-means, k = {metrics.partition.asked} (the test classes; "
                f"{metrics.partition.rule})"
            )
        if test.is_query is not None:
            queries = int(test.is_query.sum())
            heading += f"; retrieval: {queries} queries ranking a gallery of {len(test) - queries}"
        report, knn_ks = table_to_report(reference, test, recall_ks)
        notes = report.notes
        if knn_ks:
            notes = [*notes, describe_knn(len(reference), len(full_train) - len(reference))]
        beside = None
        if before is not None:
            notes = [*notes, f"before training: {before.representation}, scored alike"]
            beside = ("trained", "before training", before.metrics)
        print(format_metric_table(metrics, heading, notes=notes, beside=beside))
    return result, metrics


class Trained(NamedTuple):
    """A trained checkpoint rebuilt (:func:`load_trained`): the model in eval mode, its loss,
    the run's spec, the checkpoint folder, what the model was built for, and the run's view of
    its images (:func:`run_preprocessing`)."""

    model: nn.Module
    loss: EmbeddingLoss
    spec: RunSpec
    checkpoint: Path
    input_shape: tuple[int, ...]
    num_classes: int
    preprocessing: Preprocessing | None


def load_trained(path: Path | str) -> Trained:
    """Rebuild the model and loss of a checkpoint (or run folder) and load their weights.

    The backbone is built without the pretrained weights file the run started from: the
    checkpoint holds every parameter, so the file may have moved or gone since. Its view of
    images is the one the checkpoint stores (:func:`run_preprocessing`)."""
    checkpoint = resolve_checkpoint(Path(path), pointer="best")
    record = load_run_record(checkpoint)
    spec = RunSpec.from_dict(record["spec"])
    unweighted = {key: value for key, value in spec.model_args.items() if key != "weights"}
    shell = replace(spec, model_args=unweighted)
    input_shape = tuple(int(s) for s in record["input_shape"])
    preprocessing = run_preprocessing(spec, record, str(checkpoint))
    pieces = build(shell, input_shape, record["num_classes"], preprocessing=preprocessing)
    load_weights(checkpoint, pieces.model, pieces.loss)
    return Trained(
        pieces.model.eval(),
        pieces.loss,
        spec,
        checkpoint,
        input_shape,
        record["num_classes"],
        preprocessing,
    )
