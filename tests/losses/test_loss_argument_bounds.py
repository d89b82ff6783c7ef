"""Every loss declares the range of its own numeric arguments once (``argument_bounds``), and both
its constructor and a run's spec refuse a value outside it, NaN and infinity, in one line naming
the argument and the range (issue 37).

Parametrised over the loss registry (and OPML's unsupervised form, which a run builds instead of
``opml``): a loss registered with a bound is tested the moment it declares it, and one with a
numeric argument but no bound fails :func:`test_every_numeric_argument_has_a_declared_range`.
"""

from __future__ import annotations

import inspect
import math
import re
import types
import typing

import pytest
from _range_values import outside  # tests/: the values a range refuses

from clusterable._ranges import SettingError
from clusterable.losses import AutoencoderLoss, MsDNNLoss, available_losses, loss_class
from clusterable.recipe import RunSpec
from clusterable.train.config_typing import parameter_types
from clusterable.unsupervised import RiemannianOPMLLoss

#: The keywords a run fills in itself: never ``--loss-arg``, so checked by the constructor only.
TASK = {"num_classes": 4, "embedding_dim": 8}

#: Every loss a run can build: name -> (class, the RunSpec fields that select it).
LOSSES: dict[str, tuple[type, dict[str, object]]] = {
    **{name: (loss_class(name), {"loss": name}) for name in available_losses()},
    "opml (unsupervised)": (RiemannianOPMLLoss, {"loss": "opml", "unsupervised": True}),
}


CASES = [
    pytest.param(name, argument, value, id=f"{name}-{argument}={value}")
    for name, (cls, _) in LOSSES.items()
    for argument, bounds in cls.argument_bounds.items()
    for value in outside(bounds)
]
#: The cases a run's ``--loss-arg`` can give (the task's keywords are the run's own).
SPEC_CASES = [case for case in CASES if case.values[1] not in TASK]


def construct(cls: type, **arguments: object) -> object:
    """``cls`` with the task keywords its constructor needs, and ``arguments``."""
    parameters = inspect.signature(cls).parameters
    needed = {k: v for k, v in TASK.items() if k in parameters}
    return cls(**{**needed, **arguments})


def is_numeric(annotation: object) -> bool:
    """``int``, ``float``, ``int | None``, ``Sequence[int]``: a number, or numbers."""
    if annotation in (int, float):
        return True
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return any(is_numeric(a) for a in typing.get_args(annotation) if a is not type(None))
    return False


def test_there_are_bounds_to_test():
    assert len(CASES) > 40
    assert {"lifted", "msdnn", "snn", "center", "gaussian-corel", "opml"} <= {
        name for name, (cls, _) in LOSSES.items() if cls.argument_bounds
    }


@pytest.mark.parametrize("name", list(LOSSES))
def test_every_numeric_argument_has_a_declared_range(name):
    cls = LOSSES[name][0]
    numeric = {k for k, v in parameter_types(cls).items() if is_numeric(v)}
    assert numeric == set(cls.argument_bounds)  # a new argument gets its range where it is


@pytest.mark.parametrize("name", list(LOSSES))
def test_each_default_is_inside_its_range(name):
    cls = LOSSES[name][0]
    parameters = inspect.signature(cls).parameters
    for argument, bounds in cls.argument_bounds.items():
        default = parameters[argument].default
        if default is not inspect.Parameter.empty:
            assert bounds.holds(default), (argument, default)
    construct(cls)  # and the defaults build


@pytest.mark.parametrize(("name", "argument", "value"), CASES)
def test_the_constructor_refuses_a_value_outside_the_range(name, argument, value):
    cls = LOSSES[name][0]
    bounds = cls.argument_bounds[argument]
    with pytest.raises(SettingError) as error:
        construct(cls, **{argument: value})
    message = str(error.value)
    assert "\n" not in message
    assert f"{cls.__name__} argument {argument}=" in message
    assert bounds.describe() in message


@pytest.mark.parametrize(("name", "argument", "value"), SPEC_CASES)
def test_a_run_spec_refuses_a_loss_arg_outside_the_range(name, argument, value):
    cls, selects = LOSSES[name]
    bounds = cls.argument_bounds[argument]
    with pytest.raises(SettingError) as error:
        RunSpec(**selects, loss_args={argument: value})
    assert (error.value.setting, error.value.key) == ("loss_args", argument)
    message = str(error.value)
    assert "\n" not in message and bounds.describe() in message


@pytest.mark.parametrize(("name", "argument", "value"), SPEC_CASES)
def test_a_run_spec_refuses_the_value_as_the_command_line_gives_it(name, argument, value):
    """``--loss-arg margin=-1`` arrives as text: typed first, then held to the range."""
    cls, selects = LOSSES[name]
    describe = re.escape(cls.argument_bounds[argument].describe())
    with pytest.raises(SettingError, match=describe) as error:
        RunSpec(**selects, loss_args={argument: str(value)})
    # Held to the range as the number it is, not as text that is no number.
    assert isinstance(error.value.value, (int, float)) or not math.isfinite(value)


def test_values_inside_the_ranges_are_taken_at_their_edges():
    assert RunSpec(loss="lifted", loss_args={"margin": "0"}).loss_args == {"margin": 0.0}
    assert RunSpec(loss="cosine-corel", loss_args={"lam": 1}).loss_args == {"lam": 1.0}
    assert RunSpec(loss="center", loss_args={"alpha": 1, "lam": 0}).loss_args["alpha"] == 1.0
    assert RunSpec(loss="expected-triplet", loss_args={"margin": 0}).loss_args["margin"] == 0.0
    assert RunSpec(loss="opml", loss_args={"metric_dim": "none"}).loss_args["metric_dim"] is None
    assert construct(loss_class("center"), lam=0.0, alpha=1.0).alpha == 1.0


@pytest.mark.parametrize("weight", [-1.0, math.nan, math.inf, "-0.5"])
def test_the_autoencoder_weight_is_held_to_its_range_by_the_spec_and_the_loss(weight):
    with pytest.raises(SettingError, match=r"reconstruction_weight=.*must be at least 0"):
        RunSpec(loss="msdnn", autoencoder=True, loss_args={"reconstruction_weight": weight})
    with pytest.raises(SettingError, match="must be at least 0"):
        AutoencoderLoss(MsDNNLoss(), None, weight=float(weight))  # type: ignore[arg-type]
    spec = RunSpec(loss="msdnn", autoencoder=True, loss_args={"reconstruction_weight": 0})
    assert spec.loss_args == {"reconstruction_weight": 0.0}


def test_a_value_that_is_no_number_is_refused_by_the_constructor():
    with pytest.raises(SettingError, match=r"margin='wide' is not a number: it must be at least 0"):
        loss_class("lifted")(margin="wide")


#: Every loss argument whose range does not say what None means: (loss, argument).
NOT_OPTIONAL = [
    pytest.param(name, argument, id=f"{name}-{argument}")
    for name, (cls, _) in LOSSES.items()
    for argument, bounds in cls.argument_bounds.items()
    if bounds.none is None
]


@pytest.mark.parametrize(("name", "argument"), NOT_OPTIONAL)
def test_none_is_refused_by_the_constructor_naming_the_argument(name, argument):
    """``margin=None`` built a loss whose first call failed as Python's "unsupported operand
    type(s) for -: 'NoneType' and 'Tensor'"; ``sigma=None`` as float()'s TypeError."""
    cls = LOSSES[name][0]
    message = rf"^{cls.__name__} argument {argument}=None is not a number: it must be "
    with pytest.raises(SettingError, match=message):
        construct(cls, **{argument: None})


def test_none_keeps_its_meaning_where_the_range_gives_one():
    assert construct(loss_class("opml"), metric_dim=None).metric_dim == TASK["embedding_dim"]


def test_the_reconstruction_weight_none_is_refused_naming_it():
    with pytest.raises(SettingError, match=r"^AutoencoderLoss argument weight=None is not a "):
        AutoencoderLoss(MsDNNLoss(), None, weight=None)  # type: ignore[arg-type]


#: Every loss argument that is a count or a seed: (loss, argument).
INTEGER_ARGUMENTS = [
    pytest.param(name, argument, id=f"{name}-{argument}")
    for name, (cls, _) in LOSSES.items()
    for argument, bounds in cls.argument_bounds.items()
    if bounds.integer
]


def test_the_counts_and_seeds_are_declared_integers():
    declared = {tuple(case.values) for case in INTEGER_ARGUMENTS}
    assert {("cross-entropy", "num_classes"), ("center", "embedding_dim")} <= declared
    assert {("opml", "metric_dim"), ("opml", "seed")} <= declared
    assert ("opml (unsupervised)", "maxiter") in declared


@pytest.mark.parametrize(("name", "argument"), INTEGER_ARGUMENTS)
def test_a_fraction_is_refused_rather_than_truncated(name, argument):
    """``num_classes=2.5`` built a loss of 2 classes, then refused label 2 as out of range."""
    cls = LOSSES[name][0]
    with pytest.raises(SettingError, match=rf"^{cls.__name__} argument {argument}=2.5 is not an "):
        construct(cls, **{argument: 2.5})


#: Every switch of a loss (an argument annotated ``bool``): (loss, argument).
SWITCHES = [
    pytest.param(name, argument, id=f"{name}-{argument}")
    for name, (cls, _) in LOSSES.items()
    for argument, kind in parameter_types(cls).items()
    if kind is bool
]


def test_there_are_switches_to_test():
    declared = {tuple(case.values) for case in SWITCHES}
    assert {("lifted", "normalize"), ("msdnn", "squared"), ("msdnn", "detach_weights")} <= declared
    assert {("opml", "orthogonal"), ("opml", "weighted"), ("triplet", "normalize")} <= declared


@pytest.mark.parametrize("value", ["false", "no", None, 2, 0.5])
@pytest.mark.parametrize(("name", "argument"), SWITCHES)
def test_a_switch_that_is_no_bool_is_refused_naming_it(name, argument, value):
    """``normalize="false"`` switched normalisation on (``bool("false")`` is True), and
    ``normalize=None`` off, without a word: a string from a configuration file read by hand."""
    cls = LOSSES[name][0]
    message = rf"^{cls.__name__} argument {argument}={re.escape(repr(value))} must be True or "
    with pytest.raises(SettingError, match=message):
        construct(cls, **{argument: value})


@pytest.mark.parametrize(("name", "argument"), SWITCHES)
def test_a_switch_takes_bools_and_numpy_bools(name, argument):
    import numpy as np

    cls = LOSSES[name][0]
    for value in (True, False, np.bool_(True), 0, 1):
        assert getattr(construct(cls, **{argument: value}), argument) is bool(value)
