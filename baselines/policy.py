"""The one small interface every routing policy implements, and a registry.

A policy answers each decision point (an arriving request) with a node index.
Before answering it may act on the caches through ``sim.warm`` and
``sim.evict``. ``reset`` is called once before a run with the fresh simulator,
so a policy object can be reused across windows. Learned agents implement the
same interface (``agents/``), so the comparison run cannot tell them apart.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import os
import sys
from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from typing import Any

from envs.sim.errors import ConfigError, echoed, raise_for_policy
from envs.sim.request import Request
from envs.sim.simulator import Simulator


class Policy(ABC):
    """Base class: override :meth:`decide`; :meth:`reset` when the policy keeps state."""

    name = "policy"

    reset_run_id: int | None = None
    """The ``run_id`` of the simulator this policy's own :meth:`reset` last ran on
    (None: never, or it failed), recorded by every subclass's ``reset`` (wrapped in
    :meth:`__init_subclass__`, so a subclass need not call ``super().reset``); a
    policy without a reset of its own keeps no state and records none. The route
    envs' ``policy_action`` tells by it a policy reset on its episode's simulator
    from one reset on an earlier episode's."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own = getattr(cls, "reset", None)  # its own, or a mixin's before Policy's
        if (
            inspect.isfunction(own)
            and own is not Policy.__dict__["reset"]
            and not hasattr(own, "records_run_id")
        ):
            cls.reset = _recording_run_id(own)  # type: ignore[method-assign]

    def reset(self, sim: Simulator) -> None:
        """Forget everything from a previous run; called before each run."""
        return None

    @abstractmethod
    def decide(self, sim: Simulator, request: Request) -> int | None:
        """The node index for ``request``; ``None`` if the policy routed it itself
        with ``sim.route(node)`` (to act on the caches after routing)."""

    def check_nodes(self, n_nodes: int) -> None:
        """Raise ValueError (one line, naming the setting) if the policy's settings
        cannot work on a cluster of ``n_nodes`` (btb's M above it); the commands ask
        before any run. Nothing to check by default."""
        return None

    metric_ratios: dict[str, tuple[str, str]] = {}
    """Figures of :meth:`metrics` that are the ratio of two others, ``{key:
    (numerator key, denominator key)}`` (btb's ``shadow_hit_rate``: shadow copies
    used / made): over a row's windows, the ratio of the two keys' sums (0.0 where
    the denominator's is 0), as the row's ``warm_hit_rate`` is pooled by copies."""

    def metrics(self) -> dict[str, float]:
        """Policy-specific figures of the last run (one window), added to its result
        row (none by default). Over a row's windows, a key ending in ``_rate`` is the
        windows' unweighted mean (one of :attr:`metric_ratios` the ratio of its
        keys' sums) and any other key their sum, as a float; a key the row already
        has (``ttft_mean_s``, ``windows``) is refused, naming the policy
        (docs/metrics.md)."""
        return {}

    def run(self, sim: Simulator) -> Any:
        """Serve ``sim``'s workload (``sim.run`` resets the policy on it first);
        returns the records."""
        return sim.run(self)


def _recording_run_id(reset: Callable[..., None]) -> Callable[..., None]:
    """A policy class's own ``reset``, recording the simulator's ``run_id`` on the
    policy once it returns (:attr:`Policy.reset_run_id`)."""

    named = [  # the simulator's parameter, after self (none: a reset of *args / **kwargs)
        p.name
        for p in list(inspect.signature(reset).parameters.values())[1:2]
        if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]

    @functools.wraps(reset)
    def recorded(self: Policy, *args: Any, **kwargs: Any) -> None:
        self.reset_run_id = None
        reset(self, *args, **kwargs)
        # the simulator, however the class names its parameter and passes it
        if args:
            sim = args[0]
        elif named:
            sim = kwargs.get(named[0])
        else:
            sim = next(iter(kwargs.values()), None)
        self.reset_run_id = getattr(sim, "run_id", None)

    recorded.records_run_id = True  # type: ignore[attr-defined]
    return recorded


POLICIES: dict[str, Callable[..., Policy]] = {}


class RegistrationError(ValueError):
    """A class :func:`register` refuses (one line: ``register('mine'): ...``)."""


def register(name: str) -> Callable[[type[Policy]], type[Policy]]:
    """Class decorator: make a policy constructible by name. Refused, with a
    :class:`RegistrationError`: a class that is not a :class:`Policy` subclass, a
    ``decide`` that cannot be called as ``decide(sim, request)`` (checked here, not
    by catching a TypeError at each call, which would hide the policy's own), and a
    name another class has (a plugin would silently replace ``btb``). The same class
    registered again (its module reloaded) replaces itself."""

    def wrap(cls: type[Policy]) -> type[Policy]:
        said = f"register({name!r}): {_qualified(cls)}"
        if not (isinstance(cls, type) and issubclass(cls, Policy)):
            raise RegistrationError(
                f"{said} is not a subclass of baselines.policy.Policy (write "
                f"class {getattr(cls, '__name__', 'Mine')}(Policy) with decide(self, sim, request))"
            )
        if not _takes_sim_and_request(cls):
            raise RegistrationError(
                f"{said}.decide{inspect.signature(cls.decide)} cannot be called as "
                "decide(sim, request); a policy's is def decide(self, sim, request)"
            )
        old = POLICIES.get(name)
        if old is not None and _qualified(old) != _qualified(cls):
            raise RegistrationError(
                f"{said}: {name!r} is the name of {_qualified(old)} already; choose another name"
            )
        cls.name = name
        POLICIES[name] = cls
        return cls

    return wrap


def _qualified(obj: object) -> str:
    """``module.QualifiedName`` of a class (what a reloaded module's class shares)."""
    module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    return f"{module}.{qualname}" if module and qualname else repr(obj)


def _takes_sim_and_request(cls: type[Policy]) -> bool:
    """Whether ``cls().decide(sim, request)`` binds to ``cls.decide``'s parameters
    (a decide without a signature to read, a compiled one's, passes)."""
    raw = inspect.getattr_static(cls, "decide", None)
    bound = isinstance(raw, (staticmethod, classmethod))  # no self to pass
    try:
        signature = inspect.signature(cls.decide)
    except (TypeError, ValueError):
        return True
    try:
        signature.bind(*([None] * (2 if bound else 3)))  # (self,) sim, request
    except TypeError:
        return False
    return True


def make_policy(name: str, **kwargs: Any) -> Policy:
    """Build the policy registered as ``name`` with keyword settings. Settings its
    constructor does not take are the user's error (a ValueError naming the policy);
    what the constructor itself raises goes as a decision's does
    (:func:`~envs.sim.errors.raise_for_policy`: a bug in a policy of one's own, a
    TypeError too, is a PolicyFailure with its traceback). A ConfigError about a
    field of no owner (a plugin's ``ConfigError.about("weight", ...)``, where the
    baselines write ``btb.x``) is said as the policy's: ``NAME.weight must be ...``."""
    if not is_registered(name):
        raise ValueError(f"unknown policy {echoed(name)}; {known_policies()}")
    build = POLICIES[name]
    try:
        inspect.signature(build).bind(**kwargs)
    except TypeError as error:
        raise ValueError(f"policy {name!r}: {error}") from None
    except ValueError:
        pass  # (no signature to read: the call says)
    try:
        return build(**kwargs)
    except Exception as error:
        if isinstance(error, ConfigError) and error.fields and not error.owner:
            raise error.in_owner(name) from None
        raise_for_policy(error, f"policy {name!r}", "__init__")


# ------------------------------------------------------------------ plugins
# A router of your own lives in a module of your own that registers it
# (``@register("hitmax")``). Every command imports the modules the environment
# variable ``BTB_GYM_PLUGINS`` lists (comma-separated, importable from
# ``PYTHONPATH`` or the folder the command runs in) before it reads its options,
# and so does :func:`make_policy` for a name it does not know (a process the
# command did not start itself: a subproc env's worker)::
#
#     BTB_GYM_PLUGINS=mypolicy python -m experiments.compare policies=hitmax,btb
#
# A module that cannot be imported, or whose registration ``register`` refuses
# (a name another policy has, a class that is no Policy, a decide that does not
# take ``(sim, request)``), is one line naming it (exit 2).

VARIABLE = "BTB_GYM_PLUGINS"
_LOADED: set[str] = set()  # the plugin modules imported in this process


def plugin_names() -> list[str]:
    """The modules ``BTB_GYM_PLUGINS`` names, in order."""
    return [n.strip() for n in os.environ.get(VARIABLE, "").split(",") if n.strip()]


def _path_hint(name: str) -> str:
    """How to name a module given as a file's path (``/tmp/mine.py``, ``./mine.py``),
    which ``import`` cannot take, whatever it raised (``./mine.py``: a TypeError
    about a relative import): the file's folder as written (``.``) and its stem."""
    separators = [sep for sep in (os.sep, os.altsep) if sep]
    if not (name.endswith(".py") or any(sep in name for sep in separators)):
        return ""
    path = Path(name)
    return (
        f" ({VARIABLE} takes module names, not files: "
        f"PYTHONPATH={path.parent or '.'} {VARIABLE}={path.stem})"
    )


def is_registered(name: str) -> bool:
    """Whether ``name`` is a registered policy, the modules ``BTB_GYM_PLUGINS`` names
    imported first if it is not (a process the command did not start itself: a
    subproc env's worker, which knows only what its modules register)."""
    if name not in POLICIES:
        load_plugins()
    return name in POLICIES


def known_policies() -> str:
    """What a refusal of an unknown policy name says after it: the names registered
    in this process, and where a policy of one's own comes from. A policy a script
    registered itself is unknown to the processes it starts by spawn or forkserver
    (a SubprocVecEnv's workers) unless ``BTB_GYM_PLUGINS`` names its module."""
    known = f"known: {', '.join(sorted(POLICIES))}"
    modules = plugin_names()
    if modules:
        return f"{known} (none of that name in {VARIABLE}={','.join(modules)})"
    return f"{known} (registered in another process? name its module in {VARIABLE})"


def load_plugins() -> list[str]:
    """Import each module ``BTB_GYM_PLUGINS`` names (once a process); returns them.
    A module that fails to import, or whose registration :func:`register` refuses
    (a name another policy has: a plugin would silently replace ``btb``; a class
    that is not a Policy; a ``decide`` of the wrong signature), is a ValueError
    naming the variable and the module; the policies are left as they were."""
    names = plugin_names()
    if names and "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # as `python -m` finds the project's own modules
    for name in names:
        if name in _LOADED:
            continue
        before = dict(POLICIES)
        try:
            importlib.import_module(name)
        except Exception as error:  # its own error, whatever it is, in the one line
            POLICIES.clear()
            POLICIES.update(before)  # not the module's registrations before the failure
            said = (
                str(error)
                if isinstance(error, RegistrationError)
                else (
                    f"importing {name!r} failed: {type(error).__name__}: "
                    f"{' '.join(str(error).split())}{_path_hint(name)}"
                )
            )
            raise ValueError(f"{VARIABLE}={os.environ[VARIABLE]}: {said}") from None
        _LOADED.add(name)
    return names
