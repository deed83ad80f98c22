"""``key=value`` command-line arguments for the experiment entry points.

Every entry point declares its options as a dict of defaults; the command line
may override any of them with ``key=value``. Values are parsed to the type of
the default (int, float, bool, str, or a comma-separated list for list
defaults). Unknown keys and values of the wrong type are errors that name the
key, the value and the command.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import os
import signal
import sys
import threading
import traceback
import typing
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from agents import WorkerDied, WorkerFailed
from envs.sim.config import COPY_MODELS, SimConfig
from envs.sim.errors import (
    ConfigError,
    NamedFields,
    PolicyFailure,
    SettingWarning,
    SimulationError,
    echoed,
    named_message,
)
from envs.sim.timing import ModelSpec, model_preset
from envs.workloads.plugins import (
    FACTORY_OPTION,
    NO_FACTORY,
    PLUGIN_WORKLOAD,
    is_plugin,
    misplaced_factory,
    plugin_name,
)
from envs.workloads.readers import TraceFormatError, TraceWarning
from envs.workloads.trace_file import (
    TRACE_WORKLOAD,
    TraceOptions,
    changed_fields,
    plan_trace,
    provenance,
    trace_label,
)

LEGACY_SEED_MAX = 2**32 - 1
"""The largest seed numpy's legacy generator takes (SB3's ``set_random_seed`` and
Optuna's sampler seed it): what training and the threshold search accept."""


class UsageError(ValueError):
    """A command-line argument that cannot be used."""


FROM_COMMAND_LINE = " (from the command line)"
"""Where a value came from when the command line gave it, as an error says it."""


def unknown_option(command: str, key: str, known: str) -> UsageError:
    """``COMMAND: unknown option 'KEY' (from the command line); KNOWN``: a ``key=value``
    command's refusal of a key it does not take, saying where it came from as the
    Hydra commands' ``unknown key ... (from the command line); ...`` does. ``known``
    says what it takes (``known: a, b``)."""
    return UsageError(f"{command}: unknown option {echoed(key)}{FROM_COMMAND_LINE}; {known}")


def given_twice(command: str, key: str) -> UsageError:
    """``COMMAND: KEY= is given twice (from the command line)``: a ``key=value``
    command's refusal of a key typed twice (the last would win without a word)."""
    return UsageError(f"{command}: {key}= is given twice{FROM_COMMAND_LINE}")


_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def parse_value(text: str, default: Any) -> Any:
    """``text`` as the type of ``default`` (bool strictly: true/yes/on/1 or
    false/no/off/0); ValueError if it is not one. Other types: ``text`` itself."""
    if isinstance(default, bool):
        low = text.lower()
        if low in _TRUE:
            return True
        if low in _FALSE:
            return False
        raise ValueError(text)
    if isinstance(default, int):
        return int(text)
    if isinstance(default, float):
        return float(text)
    if isinstance(default, list):  # comma-separated, brackets optional (as Hydra's lists)
        body = text.strip()
        if len(body) >= 2 and body[0] == "[" and body[-1] == "]":
            body = body[1:-1]
        return [item.strip() for item in body.split(",") if item.strip()]
    return text


def _parse(command: str, key: str, text: str, default: Any) -> Any:
    if isinstance(default, list):
        value = parse_value(text, default)
        if text.strip().strip("[]").strip() and len(value) != text.count(",") + 1:
            raise UsageError(  # 1,,2 or 1,2,
                f"{command}: {key}={echoed(text)} has an empty entry{FROM_COMMAND_LINE}"
            )
        twice = next((item for i, item in enumerate(value) if item in value[:i]), None)
        if twice is not None:  # a result file would list it twice, and it would run once
            raise UsageError(f"{command}: {key}= lists {echoed(twice)} twice{FROM_COMMAND_LINE}")
        return value
    try:
        if isinstance(default, (bool, int, float)):
            return parse_value(text, default)
    except ValueError:
        kind = type(default).__name__
        raise UsageError(
            f"{command}: {key}={echoed(text)} is not a valid {kind}{FROM_COMMAND_LINE}"
        ) from None
    return None if text.lower() in {"none", "null"} and default is None else text


def value_said(path: str, value: Any, where: str = "") -> str:
    """``path=value (from ...)``: how an error names a value it refuses before saying
    what is wrong with it (``cluster.node='0xH100' (from the command line): n_gpus
    must be ...``); ``where`` as :func:`experiments.config.value_origin` says it."""
    return f"{path}={echoed(value)}{where}"


@contextlib.contextmanager
def naming_value(
    path: str, value: Any, origin: Callable[[str], str] | None = None
) -> Iterator[None]:
    """Where one option's value becomes one object (``node=`` -> a NodeSpec): an
    error is prefixed ``path=value (from ...):`` (``origin(path)``, if given: see
    ``config.value_origin``), and said without the object's name (``n_gpus must
    be ...``, not ``NodeSpec.n_gpus must be ...``)."""
    try:
        yield
    except ValueError as error:
        detail = named_message(error, {}, owner=False)
        where = origin(path) if origin is not None else ""
        raise ConfigError(f"{value_said(path, value, where)}: {detail}") from error


def sim_defaults() -> dict[str, Any]:
    """The simulator options of the ``key=value`` commands, ``causal_kv=`` and
    ``copy_model=``, at SimConfig's defaults (set there, once)."""
    return {"causal_kv": SimConfig.causal_kv, "copy_model": SimConfig.copy_model}


def sim_config_of(command: str, causal_kv: bool, copy_model: str) -> SimConfig:
    """The SimConfig a command's ``causal_kv=`` / ``copy_model=`` options ask for
    (``causal_kv=false`` is ``SimConfig.reference()``: every accounting setting at
    its reference value); a bad value is named as the command's own option (not as
    ``sim.copy_model``)."""
    if copy_model not in COPY_MODELS:
        raise UsageError(
            f"{command}: copy_model must be one of {', '.join(COPY_MODELS)}, "
            f"got {echoed(copy_model)}"
            f"{FROM_COMMAND_LINE}"
        )
    return SimConfig(causal_kv=causal_kv, copy_model=copy_model)


CLUSTER_OPTIONS: dict[str, str] = {
    "model.name": "NAME",
    "model.FIELD": "...",
    "cluster.node": "4xH100",
    "cluster.n_nodes": "N",
    "cluster.nodes": "[4xH100,8xH200]",
    "cluster.gpus.NAME.FIELD": "...",
}
"""The options of a cluster of one's own, on every command line: the Hydra commands'
``model`` and ``cluster`` groups' keys (docs/configuration.md; FIELD is one of
ModelSpec's or GpuSpec's fields, NAME a GPU kind of one's own), each with its value
as ``--help`` writes it. The one list: :data:`CLUSTER_PREFIXES` and
:func:`cluster_help` are made of it (which keys and values make a cluster is
``experiments.config.cluster_from_options``' to say)."""

CLUSTER_PREFIXES = tuple(dict.fromkeys(f"{key.partition('.')[0]}." for key in CLUSTER_OPTIONS))
"""How the options of :data:`CLUSTER_OPTIONS` begin (``model.``, ``cluster.``): an
argument that begins so is one of them (``+cluster.gpus.NAME.flops`` too)."""


def cluster_help(n_nodes: bool = True) -> tuple[str, ...]:
    """What ``--help`` adds for a command that takes a cluster of one's own
    (:data:`CLUSTER_OPTIONS`, each named once): ``compare``; ``costs`` with
    ``n_nodes`` False (its tables are one node's, so it refuses ``cluster.n_nodes``,
    and its help does not offer it)."""

    def typed(key: str) -> str:
        return f"{key}={CLUSTER_OPTIONS[key]}"

    nodes = (
        f"  {typed('cluster.node')} {typed('cluster.n_nodes')}, or {typed('cluster.nodes')}"
        if n_nodes
        else f"  {typed('cluster.node')}, or {typed('cluster.nodes')} for a table per node "
        "kind (a table is one node's: no cluster.n_nodes)"
    )
    return (
        "a cluster of one's own, as the Hydra commands take it (docs/configuration.md); "
        "each option changes its part of setup=:",
        f"  {typed('model.name')} {typed('model.FIELD')} (a model of one's own: ModelSpec's "
        "fields)",
        nodes,
        f"  +{typed('cluster.gpus.NAME.FIELD')} (a GPU kind of one's own: GpuSpec's fields; "
        "+ optional)",
    )


def _cluster_key(key: str) -> str | None:
    """``key`` as a cluster option's name (a leading ``+``, which Hydra wants to add a
    GPU kind of one's own, dropped), or None when it is none."""
    bare = key.removeprefix("+")
    return bare if bare.startswith(CLUSTER_PREFIXES) else None


def split_cluster_options(
    command: str, argv: Sequence[str] | None
) -> tuple[list[str], dict[str, str], frozenset[str]]:
    """``argv`` without its options of a cluster of one's own (:data:`CLUSTER_PREFIXES`),
    those as ``{key: text}``, each key once (``+`` dropped: ``+cluster.gpus.X.flops``
    and ``cluster.gpus.X.flops`` are one option), and the keys given with ``+``
    (which ``experiments.config.cluster_from_options`` refuses where Hydra does).
    Which keys and values make a cluster is ``cluster_from_options``' to say."""
    rest: list[str] = []
    given: dict[str, str] = {}
    added: set[str] = set()
    for arg in sys.argv[1:] if argv is None else argv:
        key, sep, text = arg.partition("=")
        bare = _cluster_key(key)
        if bare is None:
            rest.append(arg)
            continue
        if not sep:
            raise UsageError(f"{command}: expected key=value, got {echoed(arg)}")
        if bare in given:  # the last one would win without a word
            raise given_twice(command, bare)
        given[bare] = text
        if bare != key:
            added.add(bare)
    return rest, given, frozenset(added)


def refuse_cluster_options(command: str, argv: Sequence[str] | None, why: str) -> None:
    """A command that takes no cluster of one's own refuses its options in one line,
    naming the first and ``why`` (rather than calling it an unknown option)."""
    for arg in sys.argv[1:] if argv is None else argv:
        key = arg.partition("=")[0]
        if _cluster_key(key) is not None:
            raise UsageError(
                f"{command}: {key}= describes a cluster of one's own, which {command} does "
                f"not take: {why}"
            )


_RUNNING: list[list[str]] = []
"""For each :func:`main_guard` running (innermost last): the command named in it
(:func:`name_running`: the one whose options :func:`parse_args` read first, or the
Hydra command :func:`experiments.jobs.hydra_entry` runs), which names it in its errors."""


def name_running(command: str) -> None:
    """Inside :func:`main_guard`, ``command`` names every error it prints (the first
    command named wins: a command that runs another keeps its own name)."""
    if _RUNNING and not _RUNNING[-1]:
        _RUNNING[-1].append(command)


def running_command() -> str:
    """The command :func:`name_running` named in the innermost :func:`main_guard`
    running ("" outside one, or before it is named)."""
    return _RUNNING[-1][0] if _RUNNING and _RUNNING[-1] else ""


def parse_args(
    command: str,
    defaults: Mapping[str, Any],
    argv: Sequence[str] | None = None,
    more_help: Sequence[str] = (),
) -> dict[str, Any]:
    """Return ``defaults`` updated by ``key=value`` arguments from ``argv``. Inside
    :func:`main_guard`, ``command`` then names every error it prints. ``--help``
    lists the options with their defaults, then the lines of ``more_help``."""
    name_running(command)
    args = list(sys.argv[1:] if argv is None else argv)
    options = dict(defaults)
    if any(a in {"-h", "--help"} for a in args):
        lines = [f"usage: python -m {command} [key=value ...]", "options (defaults):"]
        lines += [f"  {k}={as_typed(v)}" for k, v in defaults.items()]
        lists = [k for k, v in defaults.items() if isinstance(v, list)]
        if lists:  # this command's own list options, and only if it has some
            first = lists[0]
            lines.append(
                f"lists ({', '.join(lists)}) are comma-separated ({first}=a,b); empty is {first}="
            )
        lines += more_help
        print("\n".join(lines))
        raise SystemExit(0)
    from baselines.policy import load_plugins
    from experiments.provenance import start_run

    load_plugins()  # policies of the user's own modules, known by name in the options
    start_run()  # what made the run, as it starts (its result files record it)
    given: set[str] = set()
    for arg in args:
        key, sep, text = arg.partition("=")
        if not sep or not key:
            raise UsageError(f"{command}: expected key=value, got {echoed(arg)}")
        if key not in defaults:
            known = ", ".join(sorted(defaults))
            raise unknown_option(command, key, f"known: {known}")
        if key in given:  # the last one would win without a word
            raise given_twice(command, key)
        given.add(key)
        options[key] = _parse(command, key, text, defaults[key])
    return options


def as_typed(value: Any) -> str:
    """A default as it would be typed on the command line."""
    if isinstance(value, (list, tuple)):
        return ",".join(str(item) for item in value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def user_error_message(
    error: BaseException, command: str = "", trace_paths: Mapping[str, str] | None = None
) -> str | None:
    """The one-line message for a user's error (a bad value: ValueError, UsageError
    included; a workload its cluster cannot serve: SimulationError; the file system:
    a missing input file, an out_dir that cannot be written; the machine: a training
    env's worker process killed, ``agents.WorkerDied``), or None for anything
    else, which is a bug and keeps its traceback. ``command``: the ``key=value``
    command's name, written first (``error: experiments.compare: ...``) unless the
    message already begins with it. ``trace_paths``: how the command spells a
    trace's options (``TRACE_PATHS``, ``workload.*``, for the commands that run
    workloads), so a trace's error raised during the run names them so."""
    if trace_paths is not None and (
        isinstance(error, NamedFields)
        and (error.owner == "TraceOptions" or isinstance(error, TraceFormatError))
    ):
        text = error.named(trace_paths)
    elif isinstance(error, (ValueError, SimulationError, WorkerDied)):
        text = str(error)
    elif isinstance(error, OSError):
        if error.strerror and error.filename is not None:
            text = f"{error.filename}: {error.strerror}"
        else:
            text = str(error)
    else:
        return None
    return f"error: {_prefixed(text, command)}"


def _prefixed(text: str, command: str) -> str:
    """``text`` said by ``command`` (``experiments.compare: ...``), once."""
    return f"{command}: {text}" if command and not text.startswith(f"{command}:") else text


def error_line(error: BaseException) -> str:
    """A job's error on one line, without ``error: ``: a user's error as
    :func:`user_error_message` says it, anything else as its type and message."""
    line = user_error_message(error) or f"error: {type(error).__name__}: {error}"
    return line.removeprefix("error: ")


INTERRUPTED = "interrupted"
"""What a command prints (and a Hydra job's log ends with) when Ctrl-C ends it;
:data:`TERMINATED` when SIGTERM does, :data:`HUNG_UP` when SIGHUP does."""
TERMINATED = "terminated"
HUNG_UP = "hangup"


class Terminated(KeyboardInterrupt):
    """SIGTERM (``kill``, ``timeout``, a batch scheduler ending a job), raised in the
    command's process where Ctrl-C raises ``KeyboardInterrupt`` (see
    :func:`terminating_as_interrupt`): the run ends as an interrupted one does,
    saying ``said`` and exiting with 128 + ``signum``."""

    signum: int = signal.SIGTERM
    said: str = TERMINATED


class HungUp(Terminated):
    """SIGHUP (the terminal the command ran in closed: an ssh session dropped
    without tmux, screen or nohup), handled as SIGTERM is."""

    signum = signal.SIGHUP
    said = HUNG_UP


STOPPING: dict[int, type[Terminated]] = {signal.SIGTERM: Terminated, signal.SIGHUP: HungUp}
"""The signals a command ends on as on Ctrl-C (:func:`terminating_as_interrupt`),
each with what it raises."""


def interruption(error: KeyboardInterrupt) -> str:
    """What ``error`` ends a run saying: :data:`TERMINATED` for SIGTERM's
    :class:`Terminated`, :data:`HUNG_UP` for SIGHUP's, else :data:`INTERRUPTED`."""
    return error.said if isinstance(error, Terminated) else INTERRUPTED


@contextlib.contextmanager
def terminating_as_interrupt(exiting: bool = False) -> Iterator[None]:
    """Within the block, SIGTERM raises :class:`Terminated` in this process, as Ctrl-C
    raises ``KeyboardInterrupt``, instead of killing it outright: every ``finally``
    and ``except BaseException`` clause runs (an ``overwrite=true`` run puts the
    earlier run's files back, a temporary file goes, a W&B run is finished).
    SIGHUP, a terminal closing (an ssh session dropped), raises :class:`HungUp`
    the same way (:data:`STOPPING`).
    ``exiting``: raise ``SystemExit(128 + signal)`` instead (143, 129), what a library
    function (``make_dataset.make_dataset``) raises: its caller's program ends with the
    status the signal gives, without a traceback (an uncaught ``KeyboardInterrupt``
    ends Python as SIGINT does), and ``except KeyboardInterrupt`` written for
    Ctrl-C does not take it for one. A process forked inside the block (a pool's
    worker) starts with these signals at their defaults again
    (:func:`_default_in_child`), so a pool's ``terminate()`` kills it at once, in
    a long C call too.

    A handler is set only where the signal has its default: a handler of the
    caller's own (or of an enclosing block: a command's :func:`main_guard` around
    ``make_dataset``) is left in place, and so is a signal ignored (whoever started
    the process chose so: ``nohup`` ignores SIGHUP). Outside the main thread (no
    signal handler can be set there) the block runs as it is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {
        signum: signal.signal(signum, _Stop(os.getpid(), error, exiting))
        for signum, error in STOPPING.items()
        if signal.getsignal(signum) == signal.SIG_DFL
    }
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


class _Stop:
    """A handler of :func:`terminating_as_interrupt`: raises ``error``
    (``SystemExit(128 + signal)`` when ``exiting``) in the process that set it."""

    def __init__(self, owner: int, error: type[Terminated], exiting: bool) -> None:
        self.owner = owner
        self.error = error
        self.exiting = exiting

    def __call__(self, signum: int, frame: Any) -> None:
        if os.getpid() != self.owner:  # a child the signal reached before its reset ran
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        if self.exiting:
            raise SystemExit(128 + signum)
        raise self.error


def _default_in_child() -> None:
    """In a process just forked (a ``fork`` pool's worker, ``reproduce jobs=N``'s),
    SIGTERM and SIGHUP back at their defaults where :class:`_Stop` handled them in
    the parent. A Python handler runs only between two bytecodes: a worker in a
    long C call (a numpy or simulator call) lived on after its pool's
    ``terminate()`` until that call returned, and the command with it."""
    for signum in STOPPING:
        if isinstance(signal.getsignal(signum), _Stop):
            with contextlib.suppress(ValueError):  # (not the main thread: none can be set)
                signal.signal(signum, signal.SIG_DFL)


if hasattr(os, "register_at_fork"):  # (once, as this module is first imported)
    os.register_at_fork(after_in_child=_default_in_child)


def exit_status(error: BaseException) -> int:
    """The status a command exits with when ``error`` ends it (:func:`main_guard`):
    130 for Ctrl-C, 143 for SIGTERM and 129 for SIGHUP (what a shell reports for
    each), 0 for a pipe's reader gone, 1 for a policy's own failure and an env
    worker's (``agents.WorkerFailed``), 2 for a user's error (and a worker process
    killed by a signal, as a full disk), a ``SystemExit``'s own code, 1 for anything
    else (a bug)."""
    if isinstance(error, SystemExit):
        code = error.code
        return code if isinstance(code, int) else 0 if code is None else 1
    if isinstance(error, Terminated):
        return 128 + error.signum
    if isinstance(error, KeyboardInterrupt):
        return 130
    if isinstance(error, BrokenPipeError):
        return 0
    if isinstance(error, (PolicyFailure, WorkerFailed)):
        return 1
    if isinstance(error, (ValueError, OSError, SimulationError, WorkerDied)):
        return 2
    return 1


def main_guard(fn: Any, trace_paths: Mapping[str, str] | None = None) -> int:
    """Run an entry point; a user's error (see :func:`user_error_message`) is printed
    as one line and exits with status 2; Ctrl-C prints ``interrupted`` and exits
    with 130 (what a shell reports for SIGINT), SIGTERM ends it the same way
    (:func:`terminating_as_interrupt`) but prints ``terminated`` and exits with 143,
    and so does SIGHUP, printing ``hangup``, exit 129. A policy's own code failing
    (``envs.sim.errors.PolicyFailure``: a bug, not bad input) prints its traceback
    and a last line naming the policy, and exits with status 1; so does an env worker of
    ``env.vec=subproc`` that exited with a status (``agents.WorkerFailed``: its env
    raised), with a last line naming the worker under the traceback the worker
    printed. Either way the run's folder is
    released (``_io.claim_out_dir``) and no half-written file is left (every file
    lands by an atomic rename).

    The whole job runs with the cyclic GC's rare threshold that simulator runs
    use (``envs.sim.rare_gc``): between runs the default one would
    start a collection over each finished run's objects, and over everything
    torch and the agents loaded, again and again (a tenth of ``compare``'s time)."""
    from envs.sim import rare_gc
    from experiments._io import release_out_dirs

    shown = warnings.showwarning
    warnings.showwarning = show_warning
    streams = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _outliving(sys.stdout), _outliving(sys.stderr)
    command: list[str] = []  # parse_args names the command here
    _RUNNING.append(command)
    with rare_gc.RARE_GC, terminating_as_interrupt():
        try:
            fn()
        except KeyboardInterrupt as interrupt:
            print(interruption(interrupt), file=sys.stderr)
            return exit_status(interrupt)
        except BrokenPipeError as gone:  # the reader went away (``--help | head``): nothing to say
            with contextlib.suppress(OSError, ValueError):  # so the exit's flush does not fail
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return exit_status(gone)
        except PolicyFailure as failure:  # a bug in a policy's code: its traceback, its name
            traceback.print_exception(failure.__cause__ or failure, file=sys.stderr)
            print(f"error: {_prefixed(str(failure), ''.join(command))}", file=sys.stderr)
            return exit_status(failure)
        except WorkerFailed as failure:  # a bug in an env's code: the worker printed its traceback
            print(f"error: {_prefixed(str(failure), ''.join(command))}", file=sys.stderr)
            return exit_status(failure)
        except (ValueError, OSError, SimulationError) as error:
            print(user_error_message(error, "".join(command), trace_paths), file=sys.stderr)
            return exit_status(error)
        finally:
            _RUNNING.pop()
            SAID_WARNINGS.clear()
            warnings.showwarning = shown
            release_out_dirs()
            for stream in (sys.stdout, sys.stderr):  # a reader gone now: not at Python's exit
                if stream is not None:
                    with contextlib.suppress(OSError, ValueError):
                        stream.flush()
            sys.stdout, sys.stderr = streams
    return 0


def _outliving(stream: Any) -> Any:
    """``stream`` wrapped in :class:`_OutlivesReader`; None (a closed descriptor at
    start-up, where ``print`` writes nothing) stays None."""
    return None if stream is None else _OutlivesReader(stream)


class _OutlivesReader:
    """``sys.stdout`` or ``sys.stderr`` for a command's run: once a pipe's reader has
    gone (``compare | head -1``), what is still written goes to /dev/null, so the
    run goes on to write its files and ends as it would have. A write into the
    closed pipe would otherwise raise ``BrokenPipeError`` in the middle of the run
    (after the table, before ``results.json``), and the run would be lost. So for
    a terminal hung up (its ssh session dropped: SIGHUP, then ``EIO`` on every
    write), so that the run ending on it puts files back and says ``hangup`` to
    no one, instead of failing on its first line."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        try:
            self._terminal = bool(stream.isatty())
        except (AttributeError, OSError, ValueError):
            self._terminal = False

    def write(self, text: str) -> Any:
        try:
            return self._stream.write(text)
        except OSError as error:
            if not _reader_gone(error, self._terminal):
                raise
            self._to_devnull()
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as error:
            if not _reader_gone(error, self._terminal):
                raise
            self._to_devnull()

    def _to_devnull(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, self._stream.fileno())
            os.close(null)
            self._stream.flush()  # what the pipe refused goes to /dev/null

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _reader_gone(error: OSError, terminal: bool) -> bool:
    """Whether a write failed on ``error`` because no one reads it any more: a pipe
    whose reader went away, a ``terminal`` hung up (``EIO``; on a file, ``EIO`` is a
    failing disk or network file system, which stays an error)."""
    return isinstance(error, BrokenPipeError) or (terminal and error.errno == errno.EIO)


SAID_WARNINGS: list[str] = []
"""The ``warning: ...`` lines said in this job or command so far: a Hydra job's log
starts with those said before it took its folder (``jobs._JobLog.start``)."""


def show_warning(message: Warning | str, category: type[Warning], *args: Any, **kw: Any) -> None:
    """A trace's warning (rows skipped, a unit guessed) or a setting's that does
    nothing as one line, ``warning: ...``, not Python's two (our source file and
    line, then the line of code), and once per job or command: a line it has said
    (:data:`SAID_WARNINGS`) is not said again. Python's own once-per-place record
    is wiped whenever a filter changes (every ``warnings.catch_warnings``, ours,
    torch's and SB3's), so a setting checked again by each ``SimConfig`` a command
    builds was said once for each (twice or three times per ``train``). Such a line
    names its setting or file and what it does, so a repeat says nothing new.
    The line is written beside any progress bar running (``tqdm.write``: the bar
    cleared, the line, then the bar again), not into the bar's line. Others as
    usual."""
    if issubclass(category, (TraceWarning, SettingWarning)):
        if issubclass(category, TraceWarning) and isinstance(message, NamedFields):
            # as the command line spells its options, wherever it was said from (a
            # trace planned again outside trace_option_warnings says it bare)
            message = message.named(TRACE_PATHS)
        line = f"warning: {message}"
        if line in SAID_WARNINGS:
            return
        from tqdm import tqdm

        tqdm.write(line, file=sys.stderr)
        SAID_WARNINGS.append(line)
    else:
        warnings._showwarning_orig(message, category, *args, **kw)  # type: ignore[attr-defined]


WORKLOAD_PREFIX = "workload."
TRACE_PATHS = {f.name: f"{WORKLOAD_PREFIX}{f.name}" for f in dataclasses.fields(TraceOptions)}
"""Each trace option's name on every command line (``workload.window_s``): what a
trace's errors and warnings about an option (``TraceOptions.window_s``,
``time_unit=``) call it on the ``key=value`` and the Hydra commands alike."""


INPUT_OPTIONS = ("resume", "train.init_from", "checkpoint", "workload.path", "path", "agents")
"""The options (of any command: a Hydra job's, a ``key=value`` command's) that name
files or folders the run reads: the trace, audit's ``path``, checkpoints and agent
folders. ``overwrite=true`` must not clear them before they are read (the
``inputs`` of ``_io.claim_out_dir``)."""


def input_paths(value_of: Callable[[str], Any]) -> list[tuple[str, str]]:
    """``(option, path)`` of each file or folder a run names for reading
    (:data:`INPUT_OPTIONS`, each entry of a list); ``value_of`` gives an option's
    value (``options.get``, or a lookup in a Hydra config), None if it has none."""
    found = []
    for option in INPUT_OPTIONS:
        value = value_of(option)
        items = value if isinstance(value, Sequence) and not isinstance(value, str) else [value]
        found += [(option, item) for item in items if isinstance(item, str) and item]
    return found


def trace_defaults() -> dict[str, Any]:
    """The trace workload's options (:class:`TraceOptions`) as ``key=value``
    defaults, spelled as on the Hydra commands: ``workload.path``, ``workload.window_s``, ..."""
    return {
        f"{WORKLOAD_PREFIX}{f.name}": getattr(TraceOptions(), f.name)
        for f in dataclasses.fields(TraceOptions)
    }


PLUGIN_OPTION = FACTORY_OPTION
"""The ``key=value`` commands' option naming a workload of one's own
(``workload=plugin workload.factory=MODULE:FUNCTION``), as the Hydra commands spell it."""


def plugin_defaults() -> dict[str, Any]:
    """The option of a workload of one's own (:data:`PLUGIN_OPTION`), unset."""
    return {PLUGIN_OPTION: ""}


def resolve_workload(command: str, options: Mapping[str, Any]) -> str:
    """The workload a ``key=value`` command runs: ``workload=plugin
    workload.factory=MODULE:FUNCTION`` is ``plugin:MODULE:FUNCTION``
    (:mod:`envs.workloads.plugins`); any other ``workload=`` as given, and
    ``workload.factory=`` beside it is refused, as ``workload=plugin`` without it, and
    ``workload.factory=`` alone where no workload is given (``bench``, which runs its
    ``workloads=`` then) is told to add ``workload=plugin``."""
    workload = str(options["workload"])
    factory = str(options.get(PLUGIN_OPTION) or "")
    if workload == PLUGIN_WORKLOAD:
        if not factory:
            raise UsageError(f"{command}: {NO_FACTORY}")
        return plugin_name(factory)
    if factory:  # (bench's workload= is empty unless given: it runs its workloads= then)
        raise UsageError(f"{command}: {misplaced_factory(workload, factory)}")
    return workload


def check_workload(command: str, workload: str, field: str = "") -> None:
    """Refuse a ``workload=`` of the command line that names no workload, as
    ``unknown workload 'x' (from the command line); known: ...``: the registry
    refuses it (:func:`envs.workloads.registry.describe`, so a workload registered
    at run time passes), the command names the origin. ``trace`` and a plugin's
    ``plugin:MODULE:FUNCTION`` are checked where the command reads them. ``field``:
    the option when it is not ``workload=`` (a name of ``workloads=``), said first
    (``COMMAND: workloads: unknown workload ...``)."""
    from envs.workloads.registry import describe, list_workloads

    if workload == TRACE_WORKLOAD or is_plugin(workload):
        return
    try:
        describe(workload)
    except ValueError:
        raise UsageError(
            f"{command}: {f'{field}: ' if field else ''}unknown workload {echoed(workload)}"
            f"{FROM_COMMAND_LINE}; known: {', '.join(list_workloads())}"
        ) from None


def check_setups(command: str, names: Sequence[str], field: str = "") -> None:
    """Refuse the first of ``names`` (a ``setup=``, or the list ``field`` gives:
    ``setups=``) that is no published setup (``envs.sim.SETUPS``), as
    ``COMMAND: [FIELD: ]unknown setup 'x' (from the command line); known: ...``."""
    from envs.sim import SETUPS

    unknown = [name for name in names if name not in SETUPS]
    if unknown:
        raise UsageError(
            f"{command}: {f'{field}: ' if field else ''}unknown setup {echoed(unknown[0])}"
            f"{FROM_COMMAND_LINE}; known: {', '.join(SETUPS)}"
        )


def check_policies(command: str, names: Sequence[str]) -> None:
    """Refuse the first of ``names`` (``policies=``) that is no baseline
    (``baselines.policy.POLICIES``, a plugin's once loaded), as ``COMMAND: unknown
    policy 'x' (from the command line); known: ...``."""
    from baselines.policy import POLICIES, known_policies

    unknown = [name for name in names if name not in POLICIES]
    if unknown:
        raise UsageError(
            f"{command}: unknown policy {echoed(unknown[0])}{FROM_COMMAND_LINE}; {known_policies()}"
        )


@contextlib.contextmanager
def trace_option_warnings() -> Iterator[None]:
    """A trace's warnings issued inside, issued again naming the options as the
    command line spells them (:data:`TRACE_PATHS`: ``set workload.time_unit=``)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", TraceWarning)
        yield
    for found in caught:
        message: Warning | str = found.message
        if isinstance(message, NamedFields):
            message = message.named(TRACE_PATHS)
        warnings.warn(message, found.category, stacklevel=3)


def _typed_trace_value(command: str, name: str, value: Any) -> Any:
    """A ``workload.*`` option whose default is None (parsed as text) as its field's type."""
    if not isinstance(value, str):
        return value
    hint = typing.get_type_hints(TraceOptions)[name]
    kinds = [k for k in typing.get_args(hint) if k is not type(None)] or [hint]
    if value.lower() in {"", "none", "null"} and type(None) in typing.get_args(hint):
        return None
    for kind in (int, float):
        if kind in kinds:
            try:
                return kind(value)
            except ValueError:
                raise UsageError(
                    f"{command}: {WORKLOAD_PREFIX}{name}={echoed(value)} is not a valid "
                    f"{kind.__name__}{FROM_COMMAND_LINE}"
                ) from None
    return value


def workload_params(
    command: str, options: Mapping[str, Any], models: Sequence[str | ModelSpec] = ()
) -> dict[str, Any]:
    """The ``workload.*`` options of a ``key=value`` command as the registry's
    parameters: with ``workload=trace`` the checked :class:`TraceOptions` fields
    (the file is read through once, so a bad row stops the command before any run),
    otherwise ``{}``, and a ``workload.*`` option given anyway is an error.
    ``models``: the served models (preset names, or a model of one's own); unless
    ``workload.max_context_tokens`` is given, a row longer than the shortest of their
    context lengths is refused."""
    values = {
        key.removeprefix(WORKLOAD_PREFIX): value
        for key, value in options.items()
        if key.startswith(WORKLOAD_PREFIX) and key != PLUGIN_OPTION  # (resolve_workload's)
    }
    workload = options["workload"]
    if workload != TRACE_WORKLOAD:
        changed = changed_fields(values)
        if changed:
            raise UsageError(
                f"{command}: {WORKLOAD_PREFIX}{changed[0]}= is an option of "
                f"workload={TRACE_WORKLOAD}, not of workload={workload}"
            )
        return {}
    typed = {name: _typed_trace_value(command, name, value) for name, value in values.items()}
    specs = [model_preset(m) if isinstance(m, str) else m for m in models]
    limits = [c for c in (m.max_context_tokens for m in specs) if c is not None]
    if typed.get("max_context_tokens") is None and limits:
        typed["max_context_tokens"] = min(limits)
    try:
        trace = TraceOptions(**typed)
        with trace_option_warnings():
            plan_trace(trace)
    except ValueError as error:
        raise UsageError(f"{command}: {named_message(error, TRACE_PATHS)}") from None
    return dataclasses.asdict(trace)


_PINNED: dict[str, dict[str, Any]] = {}
"""The trace stamped as the run in this process started (:func:`stamp_trace`), by
the path as given (a symlink repointed meanwhile is a change)."""


def stamp_trace(workload: str, params: Mapping[str, Any]) -> None:
    """A run starts on this workload: stamp its trace file now (and forget any
    earlier run's), so :func:`workload_file` records it as it was at the start and
    refuses it changed by the end."""
    _PINNED.clear()
    if workload == TRACE_WORKLOAD:
        options = TraceOptions(**params)
        _PINNED[os.path.abspath(options.path)] = provenance(options)


def workload_file(workload: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """``{"workload_file": ...}``, a trace file's stamp (size, sha256) and plan, for a
    results file's config; for a workload of one's own (``plugin:MODULE:FUNCTION``),
    ``{"workload_plugin": ...}``, its module's file and sha256 as it was imported
    (:meth:`envs.workloads.plugins.Plugin.stamp`); ``{}`` for a registered workload.

    After :func:`stamp_trace` (a command's start) the stamp is the one of the
    start, and a file that changed since is refused (the results would mix both
    files; the reader refuses a change while it reads). A file gone since keeps
    its stamp of the start, so the results are still written."""
    if is_plugin(workload):
        from envs.workloads.plugins import load_plugin

        return {"workload_plugin": load_plugin(workload).stamp()}
    if workload != TRACE_WORKLOAD:
        return {}
    options = TraceOptions(**params)
    path = str(options.path)
    first = _PINNED.get(os.path.abspath(path))
    if first is not None and not os.path.isfile(path):
        return {"workload_file": first}
    now = provenance(options)
    if first is not None and now["sha256"] != first["sha256"]:
        raise UsageError(
            f"workload.path={path!r} changed during this run (sha256 {first['sha256'][:12]}... "
            f"at its start, {now['sha256'][:12]}... now): its results would mix both files, so "
            "none are written; keep a trace unchanged while a run reads it (or run on a copy)"
        )
    return {"workload_file": first or now}


def cap_note(path: str, cap: int | None, every: str = "null") -> str:
    """`` (at most N: PATH=N; null for all)`` for a window count a config key caps
    (nothing when it does not): how a command says how many windows it ran;
    ``every`` is the value that runs them all (``compare``'s ``windows=0``)."""
    return "" if cap is None else f" (at most {cap}: {path}={cap}; {every} for all)"


def sim_note(config: SimConfig) -> str:
    """`` · causal_kv=B · copy_model=M``: the KV model a run's figures are under, on
    the line before its table (``compare``'s, ``evaluate``'s and ``train``'s
    evaluation's: :func:`experiments.jobs.evaluation_header`)."""
    return f" · causal_kv={config.causal_kv} · copy_model={config.copy_model}"


def workload_label(workload: str, params: Mapping[str, Any]) -> str:
    """What result rows call the workload: its name, followed by the generator
    parameters changed, if any (``bursted_synthetic[n_bursts=2,burst_requests=40]``),
    or ``trace:<file name>``."""
    if workload == TRACE_WORKLOAD:
        return trace_label(params["path"], params.get("merge_blocks", 1))
    if not params:
        return workload
    return f"{workload}[{','.join(f'{key!s}={value!s}' for key, value in params.items())}]"


def generator_params(
    command: str, items: Sequence[str], counts: str | Mapping[str, str]
) -> dict[str, str]:
    """A ``key=value`` command's ``params=key=value,...`` (a registered workload's
    generator parameters, as text: ``registry.configure`` converts each to its
    field's type) as a dict. A window count (``train_windows``, ...) is no generator
    parameter: refused, with ``counts`` (what sets the counts in this command; by
    count, where they differ)."""
    from envs.workloads.registry import WINDOW_COUNTS

    params: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(
                f"{command}: params items are key=value, got {echoed(item)}{FROM_COMMAND_LINE}"
            )
        if key in WINDOW_COUNTS:
            raise UsageError(
                f"{command}: params={item}: {key} is a window count, not a generator "
                f"parameter ({counts if isinstance(counts, str) else counts[key]})"
            )
        params[key] = value
    return params


@contextlib.contextmanager
def naming_params(command: str, params: Mapping[str, Any], workload: str = "") -> Iterator[None]:
    """Where ``params=`` (:func:`generator_params`) reach the generators: a field an
    error names as data (:class:`~envs.sim.errors.NamedFields`) is named as the user
    writes it, ``params=key``, whether given or another of ``workload``'s generator
    parameters (every field of its families' configs, as the Hydra commands name
    them ``workload.params.key``), and said to come from the command line as the
    Hydra commands say it (``config.first_origin``): ``(from the command line)`` when
    it is the field the error is about, ``(params=key from the command line)`` when
    another given one is."""
    try:
        yield
    except ValueError as error:
        if not isinstance(error, NamedFields) or not set(error.fields) & set(params):
            raise
        paths = {name: f"params={name}" for name in (*_generator_fields(workload), *params)}
        first = next(i for i, name in enumerate(error.fields) if name in params)
        origin = FROM_COMMAND_LINE
        if first:
            origin = f" (params={error.fields[first]} {FROM_COMMAND_LINE.lstrip(' (')}"
        raise UsageError(f"{command}: {error.named(paths)}{origin}") from None


def _generator_fields(workload: str) -> list[str]:
    """The parameters of ``workload``'s generators (its families' config fields); none
    for a workload the registry does not know (an error then names it)."""
    if not workload:
        return []
    from envs.workloads.registry import describe

    try:
        families = describe(workload).families
    except ValueError:
        return []
    return [f.name for family in families for f in dataclasses.fields(family.config)]
