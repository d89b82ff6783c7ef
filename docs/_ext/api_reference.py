"""The API reference's rules, a local Sphinx extension of the documentation (``docs/conf.py``).

- Each public object is documented once, under the shortest public path that exports it
  (``clusterable.losses.LiftedStructureLoss``, not ``clusterable.losses.lifted.``); the module
  that defines it links there. A constant is documented where its ``#:`` comment is. A module
  page is rendered by ``_templates/autosummary/module.rst`` from :func:`api_context`.
- A reference to one of our objects resolves to that one place, however the docstring names it
  (its defining module, a name its module imports, relative to the module a re-exported object
  comes from); a private object (a ``_`` part) shows as text.
- napoleon reads numpy sections in functions, classes and modules, not in attribute comments.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
from pathlib import Path
from types import ModuleType
from typing import Any

from sphinx import addnodes
from sphinx.ext.autosummary.generate import AutosummaryRenderer
from sphinx.pycode import ModuleAnalyzer

import clusterable


# ---- which public path documents each object --------------------------------------------------
def public_names(module: ModuleType) -> list[str]:
    """The names ``module`` offers: its ``__all__``, or else the functions and classes it defines
    and the constants it documents with a ``#:`` comment."""
    if hasattr(module, "__all__"):
        return list(module.__all__)
    documented = {
        name
        for scope, name in ModuleAnalyzer.for_module(module.__name__).find_attr_docs()
        if scope == ""
    }
    names = []
    for name, value in vars(module).items():
        if name.startswith("_") or isinstance(value, ModuleType):
            continue
        if (_is_code(value) and value.__module__ == module.__name__) or name in documented:
            names.append(name)
    return sorted(names)


def _is_code(value: Any) -> bool:
    return inspect.isclass(value) or inspect.isroutine(value)


def home(name: str, value: Any, module: str) -> str:
    """The shortest public module that exports ``value`` under ``name`` among the packages above
    the one that defines it (``clusterable.losses`` for ``LiftedStructureLoss``). A constant
    is documented where its ``#:`` comment is: the public module ``module`` imports it from, if
    that one offers it. Else ``module`` itself."""
    if not _is_code(value):
        source = (imported_from(module, name) if module else None) or ""
        source_module, _, source_name = source.rpartition(".")
        if source_name == name and not any(p.startswith("_") for p in source.split(".")):
            if name in public_names(importlib.import_module(source_module)):
                return home(name, value, source_module)
        return module
    parts = value.__module__.split(".")
    for end in range(1, len(parts) + 1):
        if any(part.startswith("_") for part in parts[:end]):
            break
        candidate = importlib.import_module(".".join(parts[:end]))
        if name in public_names(candidate) and getattr(candidate, name, None) is value:
            return candidate.__name__
    return module


def imported_from(module: str, name: str) -> str | None:
    """The dotted path of what ``module``'s source imports as ``name`` (under ``if
    TYPE_CHECKING:`` too), if it does."""
    tree = ast.parse(inspect.getsource(importlib.import_module(module)))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                if (alias.asname or alias.name) == name:
                    return f"{node.module}.{alias.name}"
    return None


def api_entries(fullname: str) -> list[dict[str, Any]]:
    """What the page of module ``fullname`` lists: each public name, its autodoc kind, and the
    object it links to (``here`` when this page documents it)."""
    module = importlib.import_module(fullname)
    entries = []
    for name in public_names(module):
        value = getattr(module, name)
        if isinstance(value, ModuleType):
            continue
        owner = home(name, value, fullname)
        if inspect.isclass(value):
            kind = "exception" if issubclass(value, BaseException) else "class"
        else:
            kind = "function" if inspect.isroutine(value) else "data"
        entries.append(
            {
                "name": name,
                "kind": kind,
                "here": owner == fullname,
                # autosummary takes names inside the page's module relative to it
                "target": f"{owner}.{name}".removeprefix(f"{fullname}."),
            }
        )
    return entries


def public_modules() -> list[str]:
    """Every module of the package whose path has no ``_`` part."""
    found = ["clusterable"]
    for info in pkgutil.walk_packages(clusterable.__path__, "clusterable."):
        if not any(part.startswith("_") for part in info.name.split(".")):
            found.append(info.name)
    return found


def shadowed(fullname: str) -> bool:
    """Whether the package above names something else by this module's name
    (``clusterable.cluster.aas`` is the function ``aas``, the module being ``cluster/aas.py``):
    the module page is then left out of the index, so the name refers to the function."""
    package, _, name = fullname.rpartition(".")
    return bool(package) and not isinstance(
        getattr(importlib.import_module(package), name), ModuleType
    )


def api_context() -> dict[str, Any]:
    """What the module template reads: ``api[fullname]``, the entries of each module page, and
    ``shadowed[package]``, the package's shadowed modules (which the package page lists in a
    toctree of their own, and :func:`write_shadowed_pages` writes). Plain data, so that the
    environment can cache it."""
    modules = public_modules()
    context: dict[str, Any] = {"api": {name: api_entries(name) for name in modules}}
    context["shadowed"] = {}
    for name in filter(shadowed, modules):
        package, _, short = name.rpartition(".")
        context["shadowed"].setdefault(package, []).append(short)
    return context


def set_api_context(app: Any, config: Any) -> None:
    config.autosummary_context = {**config.autosummary_context, **api_context()}


def write_shadowed_pages(app: Any) -> None:
    """The page of each shadowed module, from the same template as every other module page."""
    renderer = AutosummaryRenderer(app)
    context = app.config.autosummary_context
    for package, names in context["shadowed"].items():
        for short in names:
            fullname = f"{package}.{short}"
            page_context = {**context, "fullname": fullname, "modules": []}
            page = renderer.render("autosummary/module.rst", page_context)
            (Path(app.srcdir) / "api" / f"{fullname}.rst").write_text(page + "\n")


# ---- napoleon reads numpy sections in functions, classes and modules only -----------------------
# It reads an attribute's doc comment "Why ...: the error says it." as "TYPE: description"; ours
# are prose, so they are kept as written.
_ATTRIBUTE_DOCS: dict[int, list[str]] = {}


def keep_attribute_doc(
    app: Any, what: str, name: str, obj: Any, options: Any, lines: list[str]
) -> None:
    if what in ("attribute", "data", "property"):
        _ATTRIBUTE_DOCS[id(lines)] = list(lines)


def restore_attribute_doc(
    app: Any, what: str, name: str, obj: Any, options: Any, lines: list[str]
) -> None:
    kept = _ATTRIBUTE_DOCS.pop(id(lines), None)
    if kept is not None:
        lines[:] = kept
    # A constant without a doc comment would show its type's docstring (dict's, int's).
    type_doc = inspect.getdoc(type(obj)) if what == "data" else None
    if type_doc and "\n".join(lines).strip() == type_doc.strip():
        lines[:] = []


# ---- a reference to one of our objects under another path resolves to where it is documented --
def find_object(path: str) -> tuple[Any, Any] | None:
    """The object at dotted ``path`` and what holds it (a module or a class), or ``None``."""
    parts = path.split(".")
    for end in range(len(parts) - 1, 0, -1):
        try:
            holder: Any = importlib.import_module(".".join(parts[:end]))
        except ImportError:
            continue
        try:
            for part in parts[end:-1]:
                holder = getattr(holder, part)
            return getattr(holder, parts[-1]), holder
        except AttributeError:
            return None
    return None


def documented_name(value: Any, holder: Any, name: str) -> str | None:
    """Where the API reference documents ``value`` (``name`` in ``holder``); ``None`` where it
    does not (objects of private modules, names a module keeps to itself, other libraries)."""
    if inspect.isclass(holder):
        defining = next((c for c in holder.__mro__ if name in vars(c)), None)
        if defining is None or not defining.__module__.startswith("clusterable"):
            return None
        defining_module = importlib.import_module(defining.__module__)
        owner = documented_name(defining, defining_module, defining.__name__)
        return f"{owner}.{name}" if owner else None
    if _is_code(value) and value.__module__.startswith("clusterable"):
        module = home(value.__name__, value, "")
        return f"{module}.{value.__name__}" if module else None
    public_module = isinstance(holder, ModuleType) and holder.__name__.startswith("clusterable")
    public_module = public_module and not any(p.startswith("_") for p in holder.__name__.split("."))
    if public_module and name in public_names(holder):
        return f"{home(name, value, holder.__name__)}.{name}"
    return None


def is_private(path: str, found: tuple[Any, Any]) -> bool:
    """Whether the object at ``path`` is private: a part of its path, of its defining module or
    of its class's module starts with ``_``."""
    value, holder = found
    modules = [path]
    if _is_code(value):
        modules.append(getattr(value, "__module__", "") or "")
    if inspect.isclass(holder):
        modules.append(holder.__module__)
    return any(part.startswith("_") for text in modules for part in text.split("."))


def defining_modules(node: Any) -> list[str]:
    """The module that defines the object whose description holds ``node`` (a signature's
    annotation, a docstring's reference): its names are relative to that module, wherever the
    reference documents the object."""
    parent = node.parent
    while parent is not None and not isinstance(parent, addnodes.desc):
        parent = parent.parent
    signatures = list(parent.findall(addnodes.desc_signature)) if parent is not None else []
    found = signatures and find_object(
        f"{signatures[0].get('module')}.{signatures[0].get('fullname')}"
    )
    if not found:
        return []
    value, holder = found
    if _is_code(value):
        return [value.__module__]
    return [holder.__module__ if inspect.isclass(holder) else holder.__name__]


def resolve_own_object(app: Any, env: Any, node: Any, contnode: Any) -> Any:
    """Resolve a reference to one of our objects that names it by its defining module, by the
    module a docstring's module imports it from (for type checking too), or relative to the
    module (or a package above it) that defines the object a docstring or signature belongs to,
    wherever that object is documented, to the one place the reference documents it. A private
    object (a part of its path starts with ``_``) is not in the reference: it shows as text, as
    in signatures."""
    if node.get("refdomain") != "py":
        return None
    py = env.get_domain("py")
    target = re.sub(r"\s+", "", node["reftarget"]).lstrip("~.")  # wrapped across lines
    if any(part.startswith("_") and not part.startswith("__") for part in target.split(".")):
        return contnode  # a private name, by its spelling
    first, _, rest = target.partition(".")
    module, cls = node.get("py:module"), node.get("py:class")
    paths = [target]
    if module and cls:
        paths.append(f"{module}.{cls}.{target}")
    for scope in [module, *defining_modules(node)]:
        if not scope or not scope.startswith("clusterable"):
            continue
        parts = scope.split(".")  # the module, then the packages above it
        paths += [f"{'.'.join(parts[:end])}.{target}" for end in range(len(parts), 0, -1)]
        source = imported_from(scope, first)
        if source:
            paths.append(f"{source}.{rest}" if rest else source)
    for path in paths:
        found = find_object(path) if path.startswith("clusterable.") else None
        if found is None:
            continue
        name = documented_name(*found, path.rsplit(".", 1)[-1])
        if name and name != target:
            return py.resolve_xref(env, node["refdoc"], app.builder, "obj", name, node, contnode)
        if name is None and is_private(path, found):
            return contnode
    # The one documented object whose name ends with the target (Sphinx's "specific" search;
    # more than one is reported as ambiguous).
    node["refspecific"] = True
    return py.resolve_xref(env, node["refdoc"], app.builder, "obj", target, node, contnode)


# ---- a dataclass field with a default factory ----------------------------------------------
def factory_default_as_ellipsis(
    app: Any, what: str, name: str, obj: Any, options: Any, signature: str | None, annotation: Any
) -> tuple[str | None, Any]:
    """``field=<factory>`` is not Python, so Sphinx would split the signature at every comma:
    show it as ``field=...``."""
    return (signature and re.sub(r"\s*=\s*<factory>", " = ...", signature), annotation)


def setup(app: Any) -> dict[str, Any]:
    app.connect("config-inited", set_api_context)
    app.connect("builder-inited", write_shadowed_pages)
    app.connect("autodoc-process-signature", factory_default_as_ellipsis)
    app.connect("missing-reference", resolve_own_object)
    app.connect("autodoc-process-docstring", keep_attribute_doc, priority=100)
    app.connect("autodoc-process-docstring", restore_attribute_doc, priority=900)
    return {"parallel_read_safe": True}
