"""Docstrings agree with their signatures, read from the source (no module is imported).

Scope: every module under ``src/clusterable``, private modules included (their public names are
what the public modules re-export). A name is public when it does not start with ``_``; within a
public class, its public methods are checked, and ``__init__`` through the class.

Rules:

- every public function, class and public method of a public class has a docstring, or, for a
  method that overrides one, inherits its base's as `inspect.getdoc` and Sphinx do (a base class
  of the package is read from its source; one from another package, ``torch.nn.Module`` say, is
  imported);
- where a docstring has a ``Parameters`` section (``Other Parameters`` continue it), the names it
  lists, in order, equal the signature's parameters without ``self``/``cls``. ``*args`` and
  ``**kwargs`` are written ``*args``/``**kwargs`` (or bare ``args``/``kwargs``); ``a, b : int``
  lists two names;
- a class's ``Parameters`` describe its constructor: its own ``__init__``, or, for a dataclass or
  named tuple without one, its fields in order (``ClassVar`` and ``field(init=False)`` left out).
  A class that inherits its ``__init__`` is compared with nothing (the parent is checked).
  An ``__init__`` docstring with a ``Parameters`` section is checked as well.
- ``typing.overload`` stubs and functions nested in functions are not checked.
"""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from numpydoc.docscrape import NumpyDocString

SOURCE = Path(__file__).resolve().parents[1] / "src" / "clusterable"
MODULES = sorted(SOURCE.rglob("*.py"))

Definition = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


@dataclass(frozen=True)
class Finding:
    """One disagreement: where it is and what is wrong."""

    where: str
    problem: str

    def __str__(self) -> str:
        return f"{self.where}: {self.problem}"


def documented_names(docstring: str) -> list[str] | None:
    """The names a numpy-style docstring's Parameters (and Other Parameters) list, or None."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numpydoc warns on sections it does not know
        parsed = NumpyDocString(docstring)
    entries = [*parsed["Parameters"], *parsed["Other Parameters"]]
    if not entries:
        return None
    return [name.strip() for entry in entries for name in entry.name.split(",") if name.strip()]


def signature_names(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    """The parameters of a def, ``*args``/``**kwargs`` starred, without ``self``/``cls``."""
    arguments = function.args
    names = [a.arg for a in [*arguments.posonlyargs, *arguments.args]]
    if arguments.vararg is not None:
        names.append("*" + arguments.vararg.arg)
    names += [a.arg for a in arguments.kwonlyargs]
    if arguments.kwarg is not None:
        names.append("**" + arguments.kwarg.arg)
    is_static = any(_decorator_name(d) == "staticmethod" for d in function.decorator_list)
    if names and names[0] in ("self", "cls", "mcs") and not is_static:
        names = names[1:]
    return names


def _decorator_name(decorator: ast.expr) -> str:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    if isinstance(target, ast.Attribute):
        return target.attr
    return target.id if isinstance(target, ast.Name) else ""


def _unstarred(names: list[str]) -> list[str]:
    return [name.lstrip("*") for name in names]


def _field_names(cls: ast.ClassDef) -> list[str] | None:
    """A dataclass's or NamedTuple's constructor fields, or None for any other class."""
    decorators = {_decorator_name(d) for d in cls.decorator_list}
    bases = {ast.unparse(b).rsplit(".", 1)[-1] for b in cls.bases}
    if "dataclass" not in decorators and "NamedTuple" not in bases:
        return None
    names = []
    for statement in cls.body:
        if not (isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name)):
            continue
        if "ClassVar" in ast.unparse(statement.annotation):
            continue
        value = statement.value
        if (
            isinstance(value, ast.Call)
            and _decorator_name(value) == "field"
            and any(
                k.arg == "init" and isinstance(k.value, ast.Constant) and k.value.value is False
                for k in value.keywords
            )
        ):
            continue
        names.append(statement.target.id)
    return names


def _compare(where: str, docstring: str | None, expected: list[str]) -> Iterator[Finding]:
    if docstring is None:
        return
    listed = documented_names(docstring)
    if listed is None:
        return
    if listed != expected and _unstarred(listed) != _unstarred(expected):
        yield Finding(where, f"docstring lists {listed}, signature has {expected}")


def _is_overload(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return any(_decorator_name(d) == "overload" for d in function.decorator_list)


#: ``inherits(cls, method)``: whether a base class of ``cls`` documents ``method``.
Inherits = Callable[[ast.ClassDef, str], bool]


def _never(cls: ast.ClassDef, method: str) -> bool:
    return False


def _check_function(
    where: str,
    function: ast.FunctionDef | ast.AsyncFunctionDef,
    owner: ast.ClassDef | None = None,
    inherits: Inherits = _never,
) -> Iterator[Finding]:
    if _is_overload(function):
        return
    docstring = ast.get_docstring(function)
    if docstring is None:
        if owner is None or not inherits(owner, function.name):
            yield Finding(where, "public function without a docstring")
        return
    yield from _compare(where, docstring, signature_names(function))


def _check_class(where: str, cls: ast.ClassDef, inherits: Inherits = _never) -> Iterator[Finding]:
    docstring = ast.get_docstring(cls)
    if docstring is None:
        yield Finding(where, "public class without a docstring")
    defs = {
        node.name: node
        for node in cls.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and not _is_overload(node)
    }
    init = defs.get("__init__")
    if init is not None:
        yield from _compare(where, docstring, signature_names(init))
        yield from _compare(f"{where}.__init__", ast.get_docstring(init), signature_names(init))
    else:
        fields = _field_names(cls)
        if fields is not None:
            yield from _compare(where, docstring, fields)
    for node in cls.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and not node.name.startswith(
            "_"
        ):
            yield from _check_function(f"{where}.{node.name}", node, cls, inherits)
        elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            yield from _check_class(f"{where}.{node.name}", node, inherits)


def check_source(source: str, module: str, inherits: Inherits = _never) -> list[Finding]:
    """Every disagreement in one module's source (``inherits``: see `Package.inherits`)."""
    findings: list[Finding] = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.If):  # `if TYPE_CHECKING:` / version blocks
            body = [*node.body, *node.orelse]
        else:
            body = [node]
        for definition in body:
            if not isinstance(definition, Definition) or definition.name.startswith("_"):
                continue
            where = f"{module}.{definition.name}"
            if isinstance(definition, ast.ClassDef):
                findings += _check_class(where, definition, inherits)
            else:
                findings += _check_function(where, definition)
    return findings


def _module_name(path: Path) -> str:
    parts = path.relative_to(SOURCE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


class Package:
    """The package's modules, parsed once, and the base classes their classes name."""

    def __init__(self) -> None:
        self.paths = {_module_name(path): path for path in MODULES}

    @functools.cache  # noqa: B019 (one Package per test session)
    def tree(self, module: str) -> ast.Module:
        """The parsed source of ``module``."""
        return ast.parse(self.paths[module].read_text(encoding="utf-8"))

    def imported(self, module: str, name: str) -> str | None:
        """The dotted path ``name`` stands for in ``module`` (through its imports), or None."""
        for node in ast.walk(self.tree(module)):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    if (alias.asname or alias.name) == name:
                        return f"{node.module}.{alias.name}"
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if (alias.asname or alias.name).split(".")[0] == name:
                        return alias.name if alias.asname else name
        return None

    def find_class(self, module: str, name: str) -> tuple[str, ast.ClassDef] | str | None:
        """Class ``name`` as ``module`` sees it: ``(its module, its source)`` in the package,
        its dotted path outside it, or None."""
        for node in self.tree(module).body:
            if isinstance(node, ast.ClassDef) and node.name == name:
                return module, node
        target = self.imported(module, name)
        if target is None:
            return None
        owner, _, attribute = target.rpartition(".")
        if owner in self.paths:
            return self.find_class(owner, attribute)
        return target

    def _base_of(self, module: str, base: ast.expr) -> tuple[str, ast.ClassDef] | str | None:
        if isinstance(base, ast.Subscript):  # Generic[T], Dataset[Any]
            base = base.value
        dotted = ast.unparse(base)
        head, _, rest = dotted.partition(".")
        if not rest:
            return self.find_class(module, head)
        prefix = self.imported(module, head)
        return None if prefix is None else f"{prefix}.{rest}"

    def inherits(self, module: str, cls: ast.ClassDef, method: str) -> bool:
        """Whether a base class of ``cls`` (in ``module``) has ``method`` with a docstring."""
        for base in cls.bases:
            found = self._base_of(module, base)
            if isinstance(found, tuple):
                owner, node = found
                for item in node.body:
                    if (
                        isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
                        and item.name == method
                        and ast.get_docstring(item)
                    ):
                        return True
                if self.inherits(owner, node, method):
                    return True
            elif isinstance(found, str) and _external_doc(found, method):
                return True
        return False


def _external_doc(dotted: str, method: str) -> bool:
    module, _, name = dotted.rpartition(".")
    try:
        base = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        return False
    return bool(inspect.getdoc(getattr(base, method, None)))


PACKAGE = Package()


@pytest.mark.parametrize("path", MODULES, ids=_module_name)
def test_docstrings_match_signatures(path: Path) -> None:
    module = _module_name(path)
    findings = check_source(
        path.read_text(encoding="utf-8"),
        module,
        lambda cls, method: PACKAGE.inherits(module, cls, method),
    )
    assert not findings, "\n".join(map(str, findings))


PLANTED = '''
def scale(x, factor=2.0, *, clip=None):
    """Scale x.

    Parameters
    ----------
    x : Tensor
        Input.
    {second}
        How much.
    clip : float or None
        Upper bound.
    """


class Box:
    """A box.

    Parameters
    ----------
    width, height : float
        Its sides.
    """

    def __init__(self, width, {height}):
        self.width = width

    def area(self):
        return 0.0


@dataclass
class Point:
    """A point.

    Parameters
    ----------
    x, y : float
        Coordinates.
    """

    x: float
    {field}
    dims: ClassVar[int] = 2
'''


def test_a_planted_mismatch_is_found() -> None:
    agreeing = PLANTED.format(second="factor : float", height="height", field="y: float")
    assert [str(f) for f in check_source(agreeing, "m")] == [
        "m.Box.area: public function without a docstring"
    ]
    renamed = PLANTED.format(second="scale : float", height="depth", field="z: float")
    assert [str(f) for f in check_source(renamed, "m")] == [
        "m.scale: docstring lists ['x', 'scale', 'clip'], signature has ['x', 'factor', 'clip']",
        "m.Box: docstring lists ['width', 'height'], signature has ['width', 'depth']",
        "m.Box.area: public function without a docstring",
        "m.Point: docstring lists ['x', 'y'], signature has ['x', 'z']",
    ]


def test_variadic_parameters_may_be_starred_or_bare() -> None:
    source = '''
def call(f, *args, **kwargs):
    """Call f.

    Parameters
    ----------
    f : callable
        The function.
    {args}
        Positional arguments.
    {kwargs}
        Keyword arguments.
    """
'''
    assert check_source(source.format(args="*args", kwargs="**kwargs"), "m") == []
    assert check_source(source.format(args="args", kwargs="kwargs"), "m") == []
    assert check_source(source.format(args="**kwargs", kwargs="*args"), "m") != []


def test_an_override_inherits_only_a_documented_docstring() -> None:
    subclass = ast.parse(
        "class Mine(PairLoss):\n    def compute(self): ...\n    def brand_new(self): ..."
    ).body[0]
    assert isinstance(subclass, ast.ClassDef)
    # PairLoss, imported by the triplet module, documents compute (through EmbeddingLoss).
    assert PACKAGE.inherits("clusterable.losses.triplet", subclass, "compute")
    assert not PACKAGE.inherits("clusterable.losses.triplet", subclass, "brand_new")
    nn_module = ast.parse("class Net(nn.Module):\n    def forward(self, x): ...").body[0]
    assert isinstance(nn_module, ast.ClassDef)
    # torch.nn.Module, outside the package, is imported to read its docstrings.
    assert PACKAGE.inherits("clusterable.models.pretrained", nn_module, "forward")
    findings = check_source(
        "class Mine(PairLoss):\n    '''Mine.'''\n\n    def brand_new(self):\n        pass\n",
        "clusterable.losses.triplet",
        lambda cls, method: PACKAGE.inherits("clusterable.losses.triplet", cls, method),
    )
    assert [str(f) for f in findings] == [
        "clusterable.losses.triplet.Mine.brand_new: public function without a docstring"
    ]
