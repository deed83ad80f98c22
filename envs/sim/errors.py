"""Errors raised by the simulator for bad configuration or impossible requests."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any, NoReturn


class NamedFields:
    """A message that names settings as data, so the edge that knows their config
    paths (a Hydra app, a ``key=value`` command) names them as the user typed them
    without reading the text:

    - ``fields``: the settings the message names, the one it is about first, each
      by its name in the object checked (``n_bursts``, ``reward_scale``);
    - ``owner``: the object, if the message names it (``BurstedSyntheticConfig``,
      ``sim``), written before the first field;
    - ``template``: the message, in which each field is written ``{name}``.

    ``str()`` writes the fields as the check knows them
    (``BurstedSyntheticConfig.n_bursts must be an integer >= 0, got -1``);
    :meth:`named` writes them as config paths (``workload.params.n_bursts ...``)."""

    template: str
    fields: tuple[str, ...]
    owner: str

    def _name(self, message: str, fields: tuple[str, ...], owner: str) -> str:
        self.template, self.fields, self.owner = message, tuple(fields), owner
        return self.named({})

    def named(self, paths: Mapping[str, str], owner: bool = True) -> str:
        """The message with each field written as its entry in ``paths`` (a config
        path), or else as the check knows it: the first with its owner (unless not
        ``owner``), the others bare."""
        message = self.template
        for i, name in enumerate(self.fields):
            shown = paths.get(name) or (
                f"{self.owner}.{name}" if i == 0 and self.owner and owner else name
            )
            message = message.replace(f"{{{name}}}", shown)
        return message


class SettingWarning(UserWarning):
    """A setting that does nothing as set, or less than it asks (more windows
    than a split holds); the commands print it as one line, ``warning: ...``."""


OWN_PACKAGES = ("envs", "agents", "baselines", "experiments")
"""btb-gym's own packages: a warning's ``stacklevel`` passes over their frames, and a
plugin's recorded sha256 leaves their files out."""
PROJECT_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))


def caller_stacklevel() -> int:
    """The ``stacklevel`` that points a warning raised by the function that calls this
    at the first frame outside btb-gym's own packages (``envs``, ``agents``,
    ``baselines``, ``experiments``) and gymnasium: the script's own call
    (``gym.make``, ``gym.make_vec``, an env class, ``windows(...)``, an agents' or
    baselines' function that makes an env), however many frames of btb-gym and
    gymnasium lie between (a fixed level named gymnasium's ``make`` for one env,
    ``envs/route_warm.py`` for another, ``envs/windows.py`` for a workload's warning
    raised as an env is made, ``agents/imitation.py`` for one made by
    ``run_imitation``)."""
    frame = sys._getframe(1)  # the function that warns: stacklevel 1
    level = 1
    while frame.f_back is not None and _passed_over(frame):
        frame = frame.f_back
        level += 1
    return level


def _passed_over(frame: Any) -> bool:
    """Whether ``frame`` runs gymnasium's code or btb-gym's own (a module of one of its
    packages, in its folder: not a user's package that shares a name with one)."""
    top = str(frame.f_globals.get("__name__", "")).split(".")[0]
    if top == "gymnasium":
        return True
    if top not in OWN_PACKAGES:
        return False
    file = frame.f_globals.get("__file__")
    if not isinstance(file, str):
        return True
    return os.path.realpath(file).startswith(os.path.join(PROJECT_ROOT, top) + os.sep)


class ConfigError(NamedFields, ValueError):
    """A setting that cannot be simulated; the message names the field and value,
    the field as data too (:class:`NamedFields`). :meth:`about` builds the usual
    one-field error. A plain message (``ConfigError(f"sim.x must be ...")``) names
    no field as data and reads as written everywhere."""

    def __init__(self, message: str, fields: tuple[str, ...] = (), owner: str = "") -> None:
        super().__init__(self._name(message, fields, owner))

    @classmethod
    def about(cls, field: str, detail: str, *others: str) -> ConfigError:
        """The error ``"<field> <detail>"``: ``field`` is ``name`` or ``owner.name``
        (``sim.max_batch``, ``TraceOptions.window_s``); ``others`` are further
        settings ``detail`` names, each written ``{name}`` in it."""
        owner, _, name = field.rpartition(".")
        return cls(f"{{{name}}} {detail}", (name, *others), owner)

    def in_owner(self, owner: str) -> ConfigError:
        """The same error about the same fields of another object (a reader's
        ``ReadOptions`` check reported as the ``TraceOptions`` the user gave)."""
        return ConfigError(self.template, self.fields, owner)


ECHO_CHARS = 60
"""How much of a value an error says back (:func:`echoed`)."""


def echoed(value: Any, quoted: bool = True) -> str:
    """``value`` as an error says it back: its ``repr`` (``str`` unless ``quoted``), cut
    to its first :data:`ECHO_CHARS` characters and ``...`` when longer, so a value of
    400 digits or a pasted file does not fill the terminal. Every echo of a refused
    value goes through it (a setting's value, a key, a name, a trace row's field); a
    path is said whole (it says where to look)."""
    text = repr(value) if quoted else str(value)
    return text if len(text) <= ECHO_CHARS else f"{text[:ECHO_CHARS]}..."


def plural(n: int, word: str) -> str:
    """``n`` and ``word`` for a message, ``word`` with an ``s`` unless ``n`` is 1:
    ``1 window``, ``2 windows``, ``1,200 rows`` (a word taking ``-s`` only)."""
    return f"{n:,} {word}" + ("" if n == 1 else "s")


def named_message(error: BaseException, paths: Mapping[str, str], owner: bool = True) -> str:
    """``error``'s message with the fields it names as data (:class:`NamedFields`)
    written as their ``paths``; any other error's message as it is."""
    if isinstance(error, NamedFields):
        return error.named(paths, owner)
    return str(error)


class SimulationError(RuntimeError):
    """A workload that cannot run on the configured cluster (e.g. a request too big)."""


class PolicyFailure(Exception):
    """An exception raised by a policy's own code (its ``decide`` or a hook such as
    ``reset`` or ``metrics``): a bug in the policy, not bad input. The exception
    itself is the ``__cause__`` (its traceback leads into the policy's code); the
    message names the policy, the hook, the request being decided and, once the
    evaluator knows it, the window. Every argument is kept in ``args``, so it
    pickles (a worker process's failure reaches the parent whole)."""

    def __init__(
        self, who: str, hook: str, raised: str, request_id: str | None = None, window: str = ""
    ) -> None:
        super().__init__(who, hook, raised, request_id, window)
        self.who, self.hook, self.raised = who, hook, raised
        self.request_id, self.window = request_id, window

    def __str__(self) -> str:
        where = "" if self.request_id is None else f" at request {self.request_id!r}"
        if self.window:
            where += f" of window {self.window!r}"
        return f"{self.who} failed in {self.hook}(){where}: {self.raised}"

    def in_window(self, window: str) -> PolicyFailure:
        """The same failure, said with the window it happened in."""
        return PolicyFailure(self.who, self.hook, self.raised, self.request_id, window)


def policy_label(policy: object) -> str:
    """How errors name a policy: ``policy 'btb'`` (its ``name``), or ``policy``."""
    name = getattr(policy, "name", None)
    return f"policy {name!r}" if isinstance(name, str) and name else "policy"


PROJECT_PACKAGES = ("envs", "baselines", "agents", "experiments")
"""The project's own packages: an error one of them raises is a check of the
project's (a call the simulator refuses, a setting a baseline refuses), said on
purpose; the same error raised elsewhere (a policy of the user's own) is a bug."""


def raised_by_project(error: BaseException) -> bool:
    """Whether the innermost frame of ``error``'s traceback (where it was raised) is
    in a module of :data:`PROJECT_PACKAGES`."""
    tb = error.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    module = tb.tb_frame.f_globals.get("__name__", "")
    return isinstance(module, str) and module.partition(".")[0] in PROJECT_PACKAGES


def raise_for_policy(
    error: Exception, who: str, hook: str, request_id: str | None = None, window: str = ""
) -> NoReturn:
    """Raise what ``error``, raised while ``who`` (``policy 'btb'``) ran its ``hook``
    (at the decision of ``request_id``, in ``window``), says (call it in the
    ``except`` block that caught ``error``):

    - a :class:`ConfigError` or :class:`SimulationError` (a setting or a workload
      said to be unusable), and a ValueError or OSError the project raised on
      purpose (:func:`raised_by_project`: the simulator refusing the policy's call,
      a baseline refusing a setting), ``error`` itself: the user's error (one line,
      exit 2); a plain ValueError raised during a decision (``warm: dst must be a
      node index``) then names the policy and the request, as a bad answer's does;
    - anything else a :class:`PolicyFailure` from ``error``: a bug, kept with its
      traceback."""
    if isinstance(error, (ConfigError, SimulationError)):
        raise error
    if isinstance(error, (ValueError, OSError)) and raised_by_project(error):
        if request_id is None or type(error) is not ValueError:
            raise error
        raise ValueError(f"{who} at request {request_id!r}: {error}") from error
    said = " ".join(str(error).split())
    raised = f"{type(error).__name__}: {said}" if said else type(error).__name__
    raise PolicyFailure(who, hook, raised, request_id, window) from error
