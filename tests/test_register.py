"""The one registry contract (clusterable._register.Registry)."""

from __future__ import annotations

import pytest

from clusterable._register import Registry, accepted_keywords, check_keywords, required_keywords


@pytest.fixture
def shapes():
    registry = Registry("shape", aliases={"sq": "square"})

    @registry.register("square", label="Square", sides=4)
    def square(side: float, *, scale: float = 1.0) -> float:
        return (side * scale) ** 2

    @registry.register("circle")
    class Circle:
        def __init__(self, radius: float, precise: bool = False) -> None:
            self.radius, self.precise = radius, precise

    return registry


def test_names_metadata_labels_and_aliases(shapes):
    assert shapes.names() == ["circle", "square"]
    assert shapes.names(aliases=True) == ["circle", "square", "sq"]
    assert shapes.metadata("sq") == {"label": "Square", "sides": 4}
    assert shapes.label("square") == "Square" and shapes.label("circle") == "circle"
    assert "sq" in shapes and "triangle" not in shapes and 3 not in shapes
    assert list(shapes) == ["circle", "square"] and len(shapes) == 2


def test_entries_are_called_by_their_builders_after_the_one_keyword_check(shapes):
    # The kinds' builders (build_loss, build_model, ...) each call their entry their own way;
    # the registry has no generic build of its own, which none of them used.
    assert not hasattr(Registry, "build")
    assert shapes["sq"](2.0, scale=2.0) == 16.0
    check_keywords("shape 'circle'", shapes["circle"], {"radius": 1.0, "precise": True})
    with pytest.raises(ValueError, match="shape 'square' takes no argument size; its arguments"):
        check_keywords("shape 'square'", shapes["square"], {"size": 3})
    with pytest.raises(ValueError, match=r"takes no argument colour.*radius, precise"):
        check_keywords("shape 'circle'", shapes["circle"], {"radius": 1.0, "colour": "red"})


def test_unknown_names_list_the_choices(shapes):
    with pytest.raises(
        ValueError, match="unknown shape 'triangle'; choose one of: circle, square, sq"
    ):
        shapes["triangle"]
    with pytest.raises(
        ValueError, match=r"choose one of: circle, square, sq; did you mean circle\?$"
    ):
        shapes["circel"]  # the clusterers' names too: cluster.fit(x, "kmean") names kmeans


def test_a_name_is_registered_once(shapes):
    with pytest.raises(RuntimeError, match="registered twice"):
        shapes.add("square", lambda side: side)
    with pytest.raises(ValueError, match="non-empty string"):
        shapes.add("", lambda: None)


def test_keyword_inspection_of_functions_and_classes():
    def f(a, b=1, *args, c, d=2):
        return a

    class C:
        def __init__(self, x, y=0):
            pass

    assert accepted_keywords(f) == ["a", "b", "c", "d"]
    assert accepted_keywords(f, skip=("a",)) == ["b", "c", "d"]
    assert required_keywords(f) == ["a", "c"] and required_keywords(C) == ["x"]
    assert accepted_keywords(lambda **kw: kw) is None
    check_keywords("anything", lambda **kw: kw, {"z": 1})  # takes every keyword
    with pytest.raises(ValueError, match="C takes no argument z; its arguments are: x, y"):
        check_keywords("C", C, {"z": 1})


def test_names_in_registration_order_when_asked():
    steps = Registry("step", sort=False)
    for name in ("wash", "dry", "fold"):
        steps.add(name, len)
    assert steps.names() == list(steps) == ["wash", "dry", "fold"]
    with pytest.raises(ValueError, match="choose one of: wash, dry, fold"):
        steps["iron"]


def test_a_scratch_block_undoes_its_registrations(shapes):
    with shapes.scratch():
        shapes.add("triangle", lambda side: side, label="Triangle")
        assert shapes.names() == ["circle", "square", "triangle"]
    assert "triangle" not in shapes and shapes.names() == ["circle", "square"]
    with pytest.raises(KeyError), shapes.scratch():
        shapes.add("hexagon", lambda side: side)
        raise KeyError("a failing test")
    assert "hexagon" not in shapes


def test_an_inherited_pass_through_constructor_takes_no_keywords():
    class Plain:
        pass

    class Module:
        def __init__(self, *args, **kwargs):
            pass

    class Layer(Module):
        pass

    class Options(Module):
        def __init__(self, **options):
            super().__init__()

    assert accepted_keywords(Plain) == [] and accepted_keywords(Layer) == []
    assert required_keywords(Layer) == []
    assert accepted_keywords(Module) is None and accepted_keywords(Options) is None
    with pytest.raises(ValueError, match="Layer takes no argument margin; its arguments are: none"):
        check_keywords("Layer", Layer, {"margin": 1.0})
