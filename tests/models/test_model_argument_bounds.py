"""Every built-in model declares the range of its numeric arguments at registration
(``register_model(..., argument_bounds=...)``); ``build_model``, ``build_decoder`` and a run's
spec all refuse a value outside it, NaN and infinity, in one line naming the argument and the
range (issue 37). Parametrised over the model registry.
"""

from __future__ import annotations

import inspect
import math
import re
import typing
from collections.abc import Sequence

import pytest
from _range_values import outside  # tests/: the values a range refuses

from clusterable._ranges import SettingError
from clusterable.models import (
    available_models,
    build_decoder,
    build_model,
    model_argument_bounds,
    model_builder,
)
from clusterable.recipe import RunSpec
from clusterable.train.config_typing import parameter_types

IMAGE = (1, 8, 8)


def given(name: str, argument: str, value: float) -> object:
    """``value`` as the argument takes it: a list of widths holds it among valid widths."""
    default = inspect.signature(model_builder(name)).parameters[argument].default
    if isinstance(default, (list, tuple)):
        return (*default[:-1], value)  # the last width wrong, the others right
    return value


CASES = [
    pytest.param(name, argument, value, id=f"{name}-{argument}={value}")
    for name in available_models()
    for argument, bounds in model_argument_bounds(name).items()
    for value in outside(bounds)
]


def is_numeric(annotation: object) -> bool:
    """``int``, ``float`` or a sequence of them."""
    if annotation in (int, float):
        return True
    if typing.get_origin(annotation) in (Sequence, tuple, list):
        return any(is_numeric(a) for a in typing.get_args(annotation))
    return False


def test_there_are_bounds_to_test():
    assert len(CASES) > 30
    assert all(model_argument_bounds(name) for name in available_models())
    assert model_argument_bounds("timm:resnet18") == {}  # its library checks its own


@pytest.mark.parametrize("name", available_models())
def test_every_numeric_argument_has_a_declared_range(name):
    numeric = {k for k, v in parameter_types(model_builder(name)).items() if is_numeric(v)}
    numeric -= {"input_shape"}  # given by the run's data, not a model argument
    assert numeric == set(model_argument_bounds(name))


@pytest.mark.parametrize("name", available_models())
def test_each_default_is_inside_its_range(name):
    parameters = inspect.signature(model_builder(name)).parameters
    for argument, bounds in model_argument_bounds(name).items():
        assert bounds.holds(parameters[argument].default), argument


@pytest.mark.parametrize(("name", "argument", "value"), CASES)
def test_build_model_and_build_decoder_refuse_a_value_outside_the_range(name, argument, value):
    bounds = model_argument_bounds(name)[argument]
    for build in (build_model, build_decoder):
        with pytest.raises(SettingError) as error:
            build(name, IMAGE, 4, **{argument: given(name, argument, value)})
        message = str(error.value)
        assert "\n" not in message
        assert f"model {name!r} argument {argument}=" in message and bounds.describe() in message


@pytest.mark.parametrize(("name", "argument", "value"), CASES)
def test_a_run_spec_refuses_a_model_arg_outside_the_range(name, argument, value):
    bounds = model_argument_bounds(name)[argument]
    with pytest.raises(SettingError) as error:
        RunSpec(model=name, model_args={argument: given(name, argument, value)})
    assert (error.value.setting, error.value.key) == ("model_args", argument)
    assert "\n" not in str(error.value) and bounds.describe() in str(error.value)


@pytest.mark.parametrize(("name", "argument", "value"), CASES)
def test_a_run_spec_refuses_the_value_as_the_command_line_gives_it(name, argument, value):
    text = given(name, argument, value)
    text = ",".join(map(str, text)) if isinstance(text, tuple) else str(text)
    describe = re.escape(model_argument_bounds(name)[argument].describe())
    with pytest.raises(SettingError, match=describe) as error:
        RunSpec(model=name, model_args={argument: text})
    # Held to the range as the number(s) it is, not as text that is no number.
    assert not isinstance(error.value.value, str) or not math.isfinite(value)


def test_a_list_of_widths_names_the_wrong_one():
    with pytest.raises(SettingError, match=r"hidden_dims=\(64, 0\) holds 0: each item must be"):
        RunSpec(model="mlp", model_args={"hidden_dims": "64,0"})


def test_values_inside_the_ranges_are_taken_at_their_edges():
    spec = RunSpec(model="mlp", model_args={"hidden_dims": "", "negative_slope": 0})
    assert spec.model_args == {"hidden_dims": (), "negative_slope": 0.0}  # a linear model
    assert RunSpec(model="corel-cnn", model_args={"negative_slope": 1}).model_args
    assert build_model("lenet", IMAGE, 4, channels=(1, 1), kernel_size=1, hidden_dim=1)
