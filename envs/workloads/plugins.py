"""Workloads of one's own: a generator function of the user's, run as a registered
workload is, without editing the registry.

``workload=plugin workload.factory=MODULE:FUNCTION`` on the commands (the workload
then is ``plugin:MODULE:FUNCTION``, which ``windows()`` and the commands also take
as its name) imports ``MODULE`` (from the working folder or ``PYTHONPATH``) and
calls ``FUNCTION(window, seed, split, trace_id, **parameters)`` for each window, as
the registry calls a family's generator (:data:`ARGUMENTS`). It returns the
window's rows in the Bursted-ART layout (a list of dicts); they are checked by the
trace readers' own row checks (:class:`~envs.workloads.readers.base.RowStream`,
the Bursted-ART fields) and returned in the layout the registered generators
write, in arrival order. The function's parameters after those four that have
defaults (``rate_per_s=2.0``) are its generator parameters (``params=`` and
``+workload.params.NAME`` set them; ``block_tokens``, if it has one, is the tokens a
hash covers, else 256). Its windows are split, seeded and recorded as a registered
workload's (:mod:`envs.workloads.registry`): one family named after the function.

Every mistake is one line naming the function (a :class:`ConfigError`): a module
that cannot be imported, a name it lacks, one that is no function or whose
signature does not take the four arguments, a return value that is no list of
rows, a bad row (its number and field).
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import hashlib
import importlib
import importlib.machinery
import importlib.util
import inspect
import os
import sys
import sysconfig
import traceback
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envs.sim.checks import check_int
from envs.sim.errors import OWN_PACKAGES, PROJECT_ROOT, ConfigError, echoed
from envs.workloads.readers.base import ReadOptions, ReadReport, RowStream, TraceFormatError
from envs.workloads.readers.bursted import BLOCK_TOKENS, FORMAT

PLUGIN_WORKLOAD = "plugin"
"""The command lines' workload of one's own: ``workload=plugin workload.factory=M:F``."""
PLUGIN_PREFIX = f"{PLUGIN_WORKLOAD}:"
"""A plugin workload's name is this and its factory: ``plugin:examples.own_workload:make_rows``."""
FACTORY_OPTION = "workload.factory"
"""The option naming the function, as every command spells it (``key=value`` and Hydra)."""
NO_FACTORY = (
    f"workload={PLUGIN_WORKLOAD} needs {FACTORY_OPTION}=MODULE:FUNCTION, a generator function "
    "of your own (examples.own_workload:make_rows; docs/workloads.md)"
)
"""What ``workload=plugin`` without ``workload.factory=`` is told, on every command."""
ARGUMENTS = ("window", "seed", "split", "trace_id")
"""What the function is called with, in this order, as a family's generator is."""
PARAMETER_TYPES = (bool, int, float, str, tuple)
"""The types a generator parameter's default may have (a command line's text is
read as the default's type)."""
TAKEN_NAMES = (
    "name", "split", "seed", "limit", "train_windows", "test_windows", "val_windows",
    "train_streams",
)  # fmt: skip
"""The keywords of ``registry.windows()`` and ``configure()`` beside a workload's
parameters: a generator parameter so named would never reach the function (a window
count) or clash with them (``limit``), so it is refused."""
_STDLIB = sysconfig.get_paths()["stdlib"]


def plugin_name(factory: str) -> str:
    """The workload name of the function ``factory`` (``MODULE:FUNCTION``)."""
    return f"{PLUGIN_PREFIX}{factory}"


def is_plugin(name: object) -> bool:
    """Whether ``name`` names a plugin workload (``plugin:...``)."""
    return isinstance(name, str) and name.startswith(PLUGIN_PREFIX)


def misplaced_factory(workload: str, factory: str) -> str:
    """What ``workload.factory=FACTORY`` given beside ``workload=WORKLOAD``, which is
    not ``plugin``, is told, on every command (the ``key=value`` commands'
    ``experiments._cli.resolve_workload``, the Hydra commands'
    ``experiments.config.check_workload``): of a workload named ``plugin:M:F``, that
    it names its function already; of none (``bench``, which runs its ``workloads=``
    then), to add ``workload=plugin``; of any other, that it is no option of it."""
    if is_plugin(workload):
        return (
            f"workload={workload} names its function already; {FACTORY_OPTION}= goes with "
            f"workload={PLUGIN_WORKLOAD}"
        )
    if not workload:
        return (
            f"{FACTORY_OPTION}= goes with workload={PLUGIN_WORKLOAD}: add it "
            f"(workload={PLUGIN_WORKLOAD} {FACTORY_OPTION}={factory})"
        )
    return (
        f"{FACTORY_OPTION}= is an option of workload={PLUGIN_WORKLOAD}, not of workload={workload}"
    )


@dataclass(frozen=True)
class Plugin:
    """A user's generator function, loaded and checked."""

    name: str
    """The workload's name: ``plugin:MODULE:FUNCTION``."""
    factory: str
    """``MODULE:FUNCTION``, as given."""
    function: Callable[..., Any]
    family: str
    """Its family's name (the function's): the trace ids' prefix (``make_rows-0007``)."""
    description: str
    config: Any
    """Its generator parameters at their defaults (a frozen dataclass whose
    ``factory`` field names the function, so a window's key tells plugins apart)."""
    parameters: tuple[str, ...]
    path: str | None = None
    """The module's file, resolved (None: a module without one)."""
    sha256: str | None = None
    """The sha256 of its code as it was imported (:func:`code_sha256`): of that file's
    bytes, and of the modules of one's own it imports (:attr:`imports`) when it
    imports any: the code that makes the rows."""
    imports: tuple[str, ...] = ()
    """The files of the modules of one's own its module imports, and of the packages it
    is imported through that run code (:func:`own_imports`), resolved, sorted: what
    :attr:`sha256` covers beside :attr:`path`."""

    def stamp(self) -> dict[str, Any]:
        """What a result file records of it (``config.workload_plugin``), so runs of two
        versions of the function are told apart."""
        return {
            "factory": self.factory,
            "path": self.path,
            "sha256": self.sha256,
            "imports": list(self.imports),
        }


_LOADED: dict[str, Plugin] = {}


def load_plugin(name: str) -> Plugin:
    """The plugin workload ``name`` (``plugin:MODULE:FUNCTION``), imported and
    checked once a process; a :class:`ConfigError` (one line) for anything that
    makes it unusable."""
    found = _LOADED.get(name)
    if found is None:
        found = _LOADED[name] = _load(name)
    return found


def _load(name: str) -> Plugin:
    factory = name.removeprefix(PLUGIN_PREFIX)
    where = f"workload {name!r}"
    module_name, _, attribute = factory.partition(":")
    if not factory:  # (no workload to name: "plugin:" is no name of one)
        raise ConfigError(NO_FACTORY)
    if not module_name or not attribute:
        raise ConfigError(
            f"{where}: workload.factory={echoed(factory)} is not MODULE:FUNCTION (a function of "
            "your own, as examples.own_workload:make_rows names examples/own_workload.py's "
            "make_rows)"
        )
    if module_name.endswith(".py") or "/" in module_name or os.sep in module_name:
        dotted = module_name.removesuffix(".py").replace(os.sep, ".").replace("/", ".")
        raise ConfigError(
            f"{where}: workload.factory names a module, not a file: {dotted}:{attribute} "
            f"(run from the folder that holds {module_name})"
        )
    try:
        with importable_here():
            module = importlib.import_module(module_name)
    except Exception as error:  # a missing module, or its own code failing as it loads
        said = " ".join(str(error).split()) + _shadowed(module_name, error)
        raise ConfigError(
            f"{where}: module {module_name!r} cannot be imported{raised_at(error)}: "
            f"{type(error).__name__}: {said} (workload.factory names a module importable "
            f"from the working folder, {os.getcwd()}, or PYTHONPATH)"
        ) from None
    function: Any = module
    for part in attribute.split("."):
        if not hasattr(function, part):
            own = sorted(
                key
                for key, value in vars(module).items()
                if callable(value)
                and not key.startswith("_")
                and getattr(value, "__module__", None) == module.__name__
            )
            raise ConfigError(
                f"{where}: module {module_name!r} ({_module_file(module)}) has no attribute "
                f"{attribute!r} (its functions: {', '.join(own) or 'none'})"
            )
        function = getattr(function, part)
    if not callable(function):
        raise ConfigError(
            f"{where}: {factory} is {_kind(function)}, not a function taking "
            f"({', '.join(ARGUMENTS)})"
        )
    parameters, defaults = _parameters(where, factory, function)
    family = getattr(function, "__name__", "") or attribute.rpartition(".")[2]
    family = "".join(c if c.isalnum() or c in "_." else "_" for c in family) or "plugin"
    doc = (inspect.getdoc(function) or "").strip().split("\n\n")[0]
    description = f"Rows from {factory}, a generator of one's own" + (
        f": {' '.join(doc.split())}" if doc else "."
    )
    config_type = _config_type(factory, defaults)
    path, digest, imported = code_stamp(module)
    return Plugin(
        name,
        factory,
        function,
        family,
        description,
        config_type(),
        parameters,
        path,
        digest,
        imported,
    )


@contextlib.contextmanager
def importable_here() -> Iterator[None]:
    """The working folder on ``sys.path`` while the plugin's own code runs (its module
    as it is imported, its function as it is called), as ``python -m`` finds the
    working folder's modules, and taken off again after: a module its function
    imports as it runs (a helper beside it) is found, in a worker process too (which
    loads the plugin itself), while a file of the working folder never shadows a
    module the rest of the process imports later (a ``colorsys.py`` of one's own,
    the standard library's). Nothing is added or taken when the folder is on
    ``sys.path`` already (``""``, or its path: ``python -m`` run from it)."""
    folder = os.getcwd()
    if "" in sys.path or folder in sys.path:
        yield
        return
    sys.path.insert(0, folder)
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):  # (the code it ran took it off itself)
            sys.path.remove(folder)


def _shadowed(module_name: str, error: BaseException) -> str:
    """``; 'mine' is the package FILE, ...`` when ``module_name`` was not found because
    its top package is another one than the working folder's folder of that name,
    which has no ``__init__.py`` (a bare folder gives way to a package of its name
    anywhere on ``sys.path``: an installed one); "" otherwise."""
    top = module_name.partition(".")[0]
    folder = Path.cwd() / top
    found = getattr(sys.modules.get(top), "__file__", None)
    if (
        not isinstance(error, ModuleNotFoundError)
        or not isinstance(found, str)
        or not folder.is_dir()
        or (folder / "__init__.py").exists()
        or Path(found).resolve().parent == folder.resolve()
    ):
        return ""
    return (
        f"; {top!r} is the package {found}, not the folder {top}/ here, which has no "
        f"__init__.py and so gives way to a package of its name (add {top}/__init__.py)"
    )


def code_stamp(module: Any) -> tuple[str | None, str | None, tuple[str, ...]]:
    """A module's file, resolved; the sha256 of its code (:func:`code_sha256`: the
    file's bytes and those of the modules of one's own it imports); and those
    modules' files, resolved, sorted. (None, None, ()) for a module without a file;
    a sha256 of None when a file cannot be read. The one rule for a workload of
    one's own (:attr:`Plugin.sha256`) and a router plugin's module
    (``experiments.provenance.plugin_file``)."""
    path = getattr(module, "__file__", None)
    if not isinstance(path, str):
        return None, None, ()
    root = Path(path).resolve()
    imported = own_imports(module.__name__, root)
    try:
        digest = code_sha256(root, imported)
    except OSError:
        digest = None
    return str(root), digest, tuple(str(file) for file in imported)


def code_sha256(root: Path, imported: Iterable[Path] = ()) -> str:
    """The sha256 of a plugin's code: of its module's file ``root`` alone, the sha256
    of its bytes; with modules of one's own it imports (``imported``, their files:
    :func:`own_imports`), the sha256 of the lines ``SHA256  PATH`` (as ``sha256sum``
    writes them) of every file, ``root``'s included, PATH relative to ``root``'s
    folder with ``/``, sorted by PATH. So the digest follows the bytes and their
    places beside each other, not the folder they are in nor the module names they
    are imported by; an OSError if a file cannot be read."""
    files = [root, *(file for file in imported if file != root)]
    if len(files) == 1:
        return hashlib.sha256(root.read_bytes()).hexdigest()
    lines = sorted((Path(relative_path(file, root.parent)).as_posix(), file) for file in files)
    listing = "".join(
        f"{hashlib.sha256(file.read_bytes()).hexdigest()}  {shown}\n" for shown, file in lines
    )
    return hashlib.sha256(listing.encode()).hexdigest()


def relative_path(
    file: str | os.PathLike[str], start: str | os.PathLike[str], paths: Any = os.path
) -> str:
    """``file`` relative to the folder ``start`` (``paths.relpath``), or ``file`` as
    given when no relative path leads there (on Windows, a file on another drive
    than ``start``'s, for which ``relpath`` raises ValueError). ``paths`` is the
    path module (``os.path``; ``ntpath`` for Windows' rules on any system)."""
    try:
        return str(paths.relpath(file, start))
    except ValueError:
        return os.fspath(file)


_OWN_PACKAGES = tuple(Path(PROJECT_ROOT) / name for name in OWN_PACKAGES)
"""btb-gym's own packages: a plugin that imports them runs btb-gym's code, which a run
records by its version and git commit (``provenance.made_by``), not as the plugin's."""
_LIBRARIES = tuple(Path(sysconfig.get_paths()[key]).resolve() for key in ("stdlib", "platstdlib"))


def _users_file(origin: str) -> Path | None:
    """A module's file when it is code of one's own (not the standard library's, an
    installed package's nor btb-gym's own), resolved; else None."""
    file = Path(origin)
    if not file.is_file():
        return None
    file = file.resolve()
    if {"site-packages", "dist-packages"} & set(file.parts):
        return None
    if any(file.is_relative_to(folder) for folder in (*_LIBRARIES, *_OWN_PACKAGES)):
        return None
    return file


def _spec(name: str) -> Any:
    """The spec of the module ``name`` as an import here finds it, without importing
    anything: the imported module's own, else found on ``sys.path`` (or in its
    parent package's folders); None when there is none."""
    module = sys.modules.get(name)
    if module is not None:
        return getattr(module, "__spec__", None)
    parent = name.rpartition(".")[0]
    try:
        if not parent:
            return importlib.machinery.PathFinder.find_spec(name)
        found = _spec(parent)
        locations = getattr(found, "submodule_search_locations", None)
        if not locations:
            return None
        return importlib.machinery.PathFinder.find_spec(name, list(locations))
    except (ImportError, ValueError):
        return None


def _import_names(source: bytes, name: str, package: bool) -> set[str]:
    """The modules the source of module ``name`` (a package's ``__init__`` when
    ``package``) imports with an ``import`` statement anywhere in it (at the top, in
    a function, under a condition), or by a call whose name is written out as a
    string (:func:`_literal_import`: ``importlib.import_module("mine.helper")``):
    each one named and its parent packages, and of ``from M import N``, ``M.N`` too
    (a submodule, if it is one). A name the code makes as it runs is not known."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):  # (no Python source: its bytes count, no more)
        return set()
    anchor = name if package else name.rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                try:
                    base = importlib.util.resolve_name("." * node.level + base, anchor)
                except (ImportError, ValueError):  # (beyond its top package: it fails there)
                    continue
            found = [base, *(f"{base}.{a.name}" for a in node.names if a.name != "*")]
        elif isinstance(node, ast.Call):
            literal = _literal_import(node, anchor, name)
            if literal is None:
                continue
            found = [literal]
        else:
            continue
        for each in found:
            parts = each.split(".")
            names.update(".".join(parts[: i + 1]) for i in range(len(parts)))
    return names


_IMPORT_CALLS = ("import_module", "__import__")
"""The functions whose call imports the module its first argument names
(``importlib.import_module``, however it is reached, and the builtin ``__import__``)."""


def _literal_import(node: ast.Call, anchor: str, name: str) -> str | None:
    """The module a call ``import_module("NAME")`` or ``__import__("NAME")`` in module
    ``name`` (its package ``anchor``) imports, when its name is written out as a
    string, given by position or as ``name=`` (a relative one with a ``package=`` that
    is one too, or ``__package__`` or ``__name__``; of ``__import__``, with a ``level``
    written out, relative to ``anchor``, as ``from . import`` compiles to); None for
    any other call, or a name made as the code runs."""
    func = node.func
    called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    if called not in _IMPORT_CALLS:
        return None
    first = _argument(node, 0, "name")
    if not isinstance(first, ast.Constant) or not isinstance(first.value, str):
        return None
    wanted = first.value
    if called == "__import__":
        level = _argument(node, 4, "level")
        if level is None:
            return wanted or None
        if not isinstance(level, ast.Constant) or type(level.value) is not int:
            return None
        if level.value <= 0:
            return wanted or None
        wanted, package = "." * level.value + wanted, anchor
    elif not wanted.startswith("."):
        return wanted or None
    else:
        given = _argument(node, 1, "package")
        if isinstance(given, ast.Constant) and isinstance(given.value, str):
            package = given.value
        elif isinstance(given, ast.Name) and given.id in ("__package__", "__name__"):
            package = anchor if given.id == "__package__" else name
        else:
            return None
    try:
        return importlib.util.resolve_name(wanted, package)
    except (ImportError, ValueError):
        return None


def _argument(node: ast.Call, position: int, keyword: str) -> ast.expr | None:
    """The argument of call ``node`` at ``position`` or named ``keyword`` (None: not
    given, or after a ``*args`` that may hold it)."""
    for at, argument in enumerate(node.args):
        if isinstance(argument, ast.Starred):
            return None
        if at == position:
            return argument
    return next((k.value for k in node.keywords if k.arg == keyword), None)


def own_imports(name: str, root: Path) -> list[Path]:
    """The files of the modules of one's own that the module ``name`` (its file
    ``root``) imports, and those they import in turn: the modules an ``import``
    statement anywhere in their source names (:func:`_import_names`) that are
    neither the standard library's, an installed package's nor btb-gym's own
    (:func:`_users_file`), found as the plugin's code would find them (the imported
    module, else on ``sys.path`` with the working folder: :func:`importable_here`),
    without importing any; and the ``__init__.py`` of each package of one's own on
    ``name``'s dotted path (``examples`` of ``examples.own_workload``), which runs as
    the module is imported, when it runs anything (:func:`_runs_code`: an empty one,
    or one of a docstring alone, is left out, so a module's sha256 is the same
    imported through such a package or from its folder), with what it imports.
    Sorted; ``root`` is not among them. A module imported by a call whose name is
    written out (``importlib.import_module("mine.helper")``) is followed; one imported
    by a name made as the code runs (``importlib.import_module(name)``) is not, nor a
    file the code reads (data): an edit of either leaves the sha256 as it was. (The
    modules a run loaded are not looked at instead: which of them an import loads
    depends on what the process imported before, and the sha256 must not.)"""
    with importable_here():
        return _own_imports(name, root)


def _own_imports(name: str, root: Path) -> list[Path]:
    seen = {name}
    files: set[Path] = set()
    queue = [(name, root)]
    while queue:
        module, file = queue.pop()
        spec = _spec(module)
        package = getattr(spec, "submodule_search_locations", None) is not None
        try:
            source = file.read_bytes()
        except OSError:
            continue
        for other in sorted(_import_names(source, module, package or file.stem == "__init__")):
            if other in seen:
                continue
            seen.add(other)
            own = _own_file(other)
            if own is None or own == root or own in files:
                continue
            files.add(own)
            if own.suffix == ".py":  # (a compiled module's bytes count; it is not read)
                queue.append((other, own))
        if module == name:  # the packages it is imported through: their __init__.py runs first
            parts = name.split(".")
            for parent in (".".join(parts[:i]) for i in range(1, len(parts))):
                own = None if parent in seen else _own_file(parent)
                if own is None or own == root or own in files or not _runs_code(own):
                    continue  # (one that runs nothing is not seen: an import of it counts it)
                seen.add(parent)
                files.add(own)
                if own.suffix == ".py":
                    queue.append((parent, own))
    return sorted(files)


def _own_file(name: str) -> Path | None:
    """The file of module ``name`` as an import here finds it, when it is code of one's
    own (:func:`_users_file`), resolved; None for any other (built in, frozen, a
    namespace package, the standard library's, an installed package's, btb-gym's)."""
    found = _spec(name)
    origin = getattr(found, "origin", None)
    if not getattr(found, "has_location", False) or not isinstance(origin, str):
        return None
    return _users_file(origin)


def _runs_code(file: Path) -> bool:
    """Whether a package's ``__init__`` ``file`` runs anything as it is imported: a
    statement besides a docstring, or no Python source to read (a compiled module, or
    one that does not parse: its bytes count). An empty one, or one of a docstring and
    comments alone (``examples/__init__.py``), runs nothing."""
    if file.suffix != ".py":
        return True
    try:
        body = ast.parse(file.read_bytes()).body
    except (OSError, SyntaxError, ValueError):
        return True
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:] if isinstance(body[0].value.value, str) else body
    return bool(body)


def _parameters(
    where: str, factory: str, function: Callable[..., Any]
) -> tuple[tuple[str, ...], dict[str, Any]]:
    """The function's generator parameters (those after :data:`ARGUMENTS` that have
    defaults, by keyword) and their defaults, after checking that it takes the four
    arguments."""
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):  # (a builtin without one: called as it is)
        return (), {}
    try:
        bound = signature.bind(*(0, 0, "test", "x"))
    except TypeError as error:
        raise ConfigError(
            f"{where}: {factory}{signature} cannot be called as ({', '.join(ARGUMENTS)}): "
            f"{error} (its generator parameters, if any, come after them with defaults)"
        ) from None
    defaults: dict[str, Any] = {}
    for parameter in signature.parameters.values():
        keyword = (parameter.POSITIONAL_OR_KEYWORD, parameter.KEYWORD_ONLY)
        if parameter.name in bound.arguments or parameter.kind not in keyword:
            continue
        default = parameter.default
        if parameter.name == "factory":
            raise ConfigError(
                f"{where}: {factory} has a parameter named 'factory', which is the "
                "plugin's own (workload.factory); rename it"
            )
        if parameter.name in TAKEN_NAMES:
            raise ConfigError(
                f"{where}: {factory} has a parameter named {parameter.name!r}, which "
                "windows() and the commands take themselves (a generator parameter cannot "
                f"be called {', '.join(TAKEN_NAMES)}); rename it"
            )
        if not isinstance(default, PARAMETER_TYPES) or (
            isinstance(default, tuple)
            and not all(isinstance(v, (bool, int, float, str)) for v in default)
        ):
            raise ConfigError(
                f"{where}: {factory}'s parameter {parameter.name!r} defaults to "
                f"{echoed(default)}; a generator parameter's default is a bool, int, float, str "
                "or a tuple of them (a command line's value is read as its type)"
            )
        defaults[parameter.name] = default
    return tuple(defaults), defaults


def _config_type(factory: str, defaults: Mapping[str, Any]) -> type:
    """A frozen dataclass of the generator parameters (``registry.configure`` sets
    them by name, as a registered generator's config fields), with the function's
    ``factory`` as a field no parameter sets."""
    fields: list[Any] = [("factory", str, dataclasses.field(default=factory, init=False))]
    fields += [
        (key, type(value), dataclasses.field(default=value)) for key, value in defaults.items()
    ]

    def post_init(self: Any) -> None:
        for key, default in defaults.items():  # a value typed already (Hydra's, Python's)
            value = _typed(factory, key, default, getattr(self, key))
            object.__setattr__(self, key, value)
        if "block_tokens" in defaults:
            check_int(f"{factory}.block_tokens", self.block_tokens, 1)

    def reduce(self: Any) -> tuple[Any, ...]:  # (pickled by its factory and values)
        values = {key: getattr(self, key) for key in defaults}
        return (plugin_config, (factory, values))

    namespace = {"__post_init__": post_init, "__reduce__": reduce}
    return dataclasses.make_dataclass(factory, fields, frozen=True, namespace=namespace)


def _typed(factory: str, key: str, default: Any, value: Any) -> Any:
    """A generator parameter's ``value`` as its ``default``'s type, as the function
    expects it: a command line's text is read so (``registry._convert``), but a value
    typed already (Hydra's ``+workload.params.n=2.5``, a caller's) is checked here. An
    integral float is an int (2.0: 2), an int a float, a number a str; anything else
    is a :class:`ConfigError` naming the parameter."""
    kind = type(default)
    if kind is bool:
        if isinstance(value, bool):
            return value
    elif kind is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
    elif kind is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    elif kind is str:
        if isinstance(value, str):
            return value
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)
    elif isinstance(value, tuple) and all(
        isinstance(item, (bool, int, float, str)) for item in value
    ):
        return value
    said = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}
    rule = said.get(kind, "a tuple of bools, ints, floats or strs")
    raise ConfigError.about(
        f"{factory}.{key}", f"must be {rule}, as its default {default!r} is, got {echoed(value)}"
    )


def plugin_config(factory: str, values: Mapping[str, Any]) -> Any:
    """The configuration of the plugin ``factory`` with its parameters ``values``."""
    return dataclasses.replace(load_plugin(plugin_name(factory)).config, **values)


def plugin_rows(config: Any, window: int, seed: int, split: str, trace_id: str) -> list[dict]:
    """A family's generator (``registry.RowMaker``) for a plugin: its function's rows
    of window ``window``, checked (:func:`checked_rows`)."""
    plugin = load_plugin(plugin_name(config.factory))
    values = {key: getattr(config, key) for key in plugin.parameters}
    block_tokens = int(getattr(config, "block_tokens", BLOCK_TOKENS))

    def made() -> list[dict[str, Any]]:
        rows = plugin.function(window, seed, split, trace_id, **values)
        return checked_rows(rows, plugin, trace_id, split, block_tokens)

    with importable_here():
        rows = made()
        again = None
        if config not in _REPEATED:  # the first window a process makes of it: made twice
            _REPEATED.add(config)
            again = made()
    if again is not None:
        differs = _difference(rows, again)
        if differs:
            raise ConfigError(
                f"workload {plugin.name!r}: {plugin.factory} on {split} window {trace_id!r} "
                f"(seed {seed}) returned other rows when called again with the same "
                f"arguments ({differs}): its rows must follow from its arguments alone, "
                "or runs, splits and datasets of it are not reproducible (draw from "
                "np.random.default_rng([seed, window]), not an unseeded generator or the "
                "clock)"
            )
    return rows


_REPEATED: set[Any] = set()
"""The plugin configurations whose first window was made twice, to tell a function
that ignores its seed (an unseeded generator, the clock) from one that follows its
arguments, once a process."""


_SAID_FIRST = (
    "arrival_s",
    "input_length",
    "output_length",
    "hash_ids",
    "group_id",
    "source",
    "metadata",
    "tenant",
    "request_id",
    "trace_id",
    "split",
)
"""The fields of a made row in the order a difference is looked for (the drawn ones first)."""


def _difference(rows: list[dict[str, Any]], again: list[dict[str, Any]]) -> str:
    """Where two makings of a window differ, as an error says it ("" where they do not)."""
    if len(rows) != len(again):
        return f"{len(rows)} rows, then {len(again)}"
    for number, (first, second) in enumerate(zip(rows, again, strict=True), 1):
        for key in sorted(first, key=_SAID_FIRST.index):
            value, other = first[key], second.get(key)
            if other != value:
                return (
                    f"row {number} in arrival order, field {key!r}: "
                    f"{echoed(value)}, then {echoed(other)}"
                )
        if first != second:
            return f"row {number} in arrival order"
    return ""


def checked_rows(
    made: Any, plugin: Plugin, trace_id: str, split: str, block_tokens: int
) -> list[dict[str, Any]]:
    """The rows a plugin's function returned for window ``trace_id`` of ``split``,
    checked as a Bursted-ART trace file's rows are (:class:`RowStream`: the fields'
    types and ranges, the block count at ``block_tokens``) and returned in the layout
    the registered generators write (every field, in arrival order; ``trace_id`` and
    ``split`` filled in where a row leaves them out). Anything else is a
    :class:`ConfigError` naming the function, the window and the row."""
    where = f"workload {plugin.name!r}: {plugin.factory} on {split} window {trace_id!r}"
    if isinstance(made, (str, bytes, Mapping)) or not isinstance(made, (list, tuple, Iterator)):
        raise ConfigError(
            f"{where} returned {_kind(made)}; it returns the window's rows, a list of "
            "dicts in the Bursted-ART layout (docs/workloads.md)"
        )
    given: list[Mapping[str, Any]] = []
    for number, row in enumerate(made, 1):
        if not isinstance(row, Mapping):
            raise ConfigError(f"{where}: row {number} is {_kind(row)}, not a dict")
        unknown = [str(key) for key in row if key not in FORMAT.fields]
        if unknown:
            raise ConfigError(
                f"{where}: row {number} has the field {unknown[0]!r}, which the rows' "
                f"layout has not (its fields: {', '.join(sorted(FORMAT.fields))})"
            )
        filled = dict(row)
        for key, value in (("trace_id", trace_id), ("split", split)):
            if filled.get(key) in (None, ""):
                filled[key] = value
            elif filled[key] != value:
                raise ConfigError(
                    f"{where}: row {number}, field {key!r}: is {echoed(filled[key])}, but the "
                    f"window is {echoed(value)} (leave it out, or give the {key} argument)"
                )
        given.append(filled)
    remedy = (
        "a hash covers {block_tokens} tokens: hash the prompt in blocks of that many, "
        "or set {block_tokens}= to the size the hashes cover"
        if "block_tokens" in plugin.parameters
        else f"a hash covers {BLOCK_TOKENS} tokens unless the function takes a "
        "block_tokens=N parameter (a default of its own)",
        ("block_tokens",) if "block_tokens" in plugin.parameters else (),
    )
    stream = RowStream(
        enumerate(given, 1),
        FORMAT,
        ReadOptions(block_tokens=block_tokens),
        ReadReport(source=where),
        block_origin=f"{plugin.factory}'s",
        block_remedy=remedy,
        time_remedy=("it returns seconds from the window's start", ()),
    )
    rows: list[dict[str, Any]] = []
    try:
        for _, parsed in stream:
            row = {
                "request_id": parsed.request_id,
                "trace_id": trace_id,
                "source": parsed.source,
                "arrival_s": parsed.time,
                "input_length": parsed.input_tokens,
                "output_length": parsed.output_tokens,
                "hash_ids": list(parsed.hash_ids),
                "group_id": parsed.group_id,
                "split": split,
                "metadata": {"job_kind": parsed.job_kind},
            }
            if parsed.tenant:
                row["tenant"] = parsed.tenant
            rows.append(row)
    except TraceFormatError as error:
        field = "" if error.field is None else f", field {error.field!r}"
        raise ConfigError(
            f"{where}: row {error.line}{field}: {error.reason}", error.fields
        ) from None
    rows.sort(key=lambda row: row["arrival_s"])  # (stable: rows at one time keep their order)
    return rows


def _kind(value: Any) -> str:
    """A value as a message names its type: ``a dict``, ``None``."""
    if value is None:
        return "None"
    name = type(value).__name__
    return f"{'an' if name[:1] in 'aeiou' else 'a'} {name}"


def _module_file(module: Any) -> str:
    path = getattr(module, "__file__", None)
    return shown_path(path) if isinstance(path, str) else "no file"


def raised_at(error: BaseException) -> str:
    """`` at FILE:LINE``: the innermost line of ``error``'s traceback in Python source
    of the user's own (not this module's, the standard library's or an installed
    package's, nor compiled: numpy's ``_generator.pyx``), its file shown relative to
    the working folder when below it; "" when there is none."""
    frames = [
        f
        for f in traceback.extract_tb(error.__traceback__)
        if _own_code(f.filename) and os.path.abspath(f.filename) != os.path.abspath(__file__)
    ]
    if not frames and isinstance(error, SyntaxError) and error.filename:
        return f" at {shown_path(error.filename)}:{error.lineno}"
    return f" at {shown_path(frames[-1].filename)}:{frames[-1].lineno}" if frames else ""


def _own_code(filename: str) -> bool:
    parts = filename.replace("\\", "/").split("/")
    library = "site-packages" in parts or "dist-packages" in parts
    return filename.endswith(".py") and not library and not filename.startswith(_STDLIB)


def shown_path(filename: str) -> str:
    """``filename`` relative to the working folder when it lies below it."""
    relative = relative_path(filename, os.curdir)
    return filename if relative.startswith("..") else relative


__all__ = [
    "ARGUMENTS",
    "FACTORY_OPTION",
    "PLUGIN_PREFIX",
    "PLUGIN_WORKLOAD",
    "Plugin",
    "checked_rows",
    "code_sha256",
    "code_stamp",
    "is_plugin",
    "load_plugin",
    "misplaced_factory",
    "own_imports",
    "plugin_config",
    "plugin_name",
    "plugin_rows",
    "raised_at",
    "relative_path",
    "shown_path",
]
