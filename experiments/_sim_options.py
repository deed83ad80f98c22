"""``sim.NAME=VALUE`` arguments of the ``key=value`` commands (``compare``): the
options of :class:`envs.sim.SimConfig` with a default of their own (the stale
view, faults, tenancy, the cache lifecycle, speculation, the realism options),
spelled as the Hydra commands spell them (``sim.router_view_delay_s=0.05``,
``sim.fault_node_loss_s=30,60 sim.fault_node_loss_nodes=0,1``,
``sim.model_versions=v1,v2,v1,v1``, ``sim.reclaim_order=replicas_first``).
``causal_kv`` and ``copy_model`` are compare's own options; the accounting
settings that follow the KV model (default None) are not taken here."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from envs.sim import ConfigError, SimConfig
from envs.sim.errors import echoed
from experiments._cli import FROM_COMMAND_LINE, UsageError, as_typed, given_twice, unknown_option

PREFIX = "sim."
OWN = ("causal_kv", "copy_model")
"""The SimConfig options the commands take as options of their own (``copy_model=``)."""
NAMES = tuple(
    f.name for f in dataclasses.fields(SimConfig) if f.name not in OWN and f.default is not None
)
"""The SimConfig options a ``sim.NAME=`` argument may set."""
HELP = (
    "sim.NAME=VALUE sets a simulator option (envs.sim.SimConfig; its field docs give "
    "each default and meaning):",
    *(f"  {PREFIX}{name}={as_typed(getattr(SimConfig, name))}" for name in NAMES),
)
"""What ``--help`` adds to the options of a command that takes them."""


def split_sim_options(
    command: str, argv: Sequence[str] | None
) -> tuple[list[str] | None, dict[str, Any]]:
    """``argv`` without its ``sim.NAME=VALUE`` arguments, and those parsed by the
    type of the field's default (a list: comma-separated, brackets optional)."""
    if argv is None:
        import sys

        argv = sys.argv[1:]
    rest: list[str] = []
    options: dict[str, Any] = {}
    for arg in argv:
        key, sep, text = arg.partition("=")
        if not key.startswith(PREFIX):
            rest.append(arg)
            continue
        name = key[len(PREFIX) :]
        if name in OWN:  # spelled as the Hydra commands spell it
            raise UsageError(
                f"{command}: {key}= is an option of its own here: "
                f"{name}={echoed(text, quoted=False)}"
            )
        if not sep or name not in NAMES:
            raise unknown_option(command, key, f"sim. options: {', '.join(NAMES)}")
        if name in options:  # the last one would win without a word
            raise given_twice(command, key)
        options[name] = _parsed(command, key, text, getattr(SimConfig, name))
    return rest, options


def _parsed(command: str, key: str, text: str, default: Any) -> Any:
    if isinstance(default, bool):
        if text.lower() not in ("true", "false"):
            raise UsageError(
                f"{command}: {key}={echoed(text)} is not true or false{FROM_COMMAND_LINE}"
            )
        return text.lower() == "true"
    if isinstance(default, str):
        return text
    if isinstance(default, tuple):
        body = text.strip().strip("[]").strip()
        items = [item.strip() for item in body.split(",")] if body else []
        if "" in items:  # (dropped, it shifted every later entry to another node)
            raise UsageError(
                f"{command}: {key}={echoed(text)} has an empty entry{FROM_COMMAND_LINE}"
            )
        if key.endswith("model_versions"):
            return tuple(items)
        kind: type = int if key.endswith("_nodes") else float
        try:
            return tuple(kind(item) for item in items)
        except ValueError:
            raise UsageError(
                f"{command}: {key}={echoed(text)} is not a comma-separated list of "
                f"{'node indices' if kind is int else 'numbers'}{FROM_COMMAND_LINE}"
            ) from None
    try:
        return int(text) if isinstance(default, int) else float(text)
    except ValueError:
        kind_name = "int" if isinstance(default, int) else "number"
        raise UsageError(
            f"{command}: {key}={echoed(text)} is not a valid {kind_name}{FROM_COMMAND_LINE}"
        ) from None


def with_sim_options(config: SimConfig, options: dict[str, Any]) -> SimConfig:
    """``config`` with the parsed ``sim.`` options set (checked by SimConfig)."""
    return dataclasses.replace(config, **options) if options else config


@contextlib.contextmanager
def naming_sim_options(options: Mapping[str, Any]) -> Iterator[None]:
    """Where the parsed ``sim.`` ``options`` meet SimConfig's checks (made with them,
    ``check_cluster``): an error about settings (a :class:`ConfigError` naming them as
    data) names each as ``sim.NAME`` and says where the first of them given came
    from, as the Hydra commands say it (``config.first_origin``): ``(from the command
    line)`` for the one it is about, ``(sim.NAME from the command line)`` for another
    (``sim.fault_node_loss_s has 0 times but sim.fault_node_loss_nodes has 1 node:
    ... (sim.fault_node_loss_nodes from the command line)``). One about none of them
    (a default's) is as it was."""
    try:
        yield
    except ConfigError as error:
        names = [name.partition("[")[0] for name in error.fields]  # (nodes[0]: nodes)
        given = [i for i, name in enumerate(names) if name in options]
        if error.owner != PREFIX.rstrip(".") or not given:
            raise
        first = given[0]
        origin = FROM_COMMAND_LINE
        if first:
            origin = f" ({PREFIX}{names[first]} {FROM_COMMAND_LINE.lstrip(' (')}"
        paths = {name: f"{PREFIX}{name}" for name in error.fields}
        raise ConfigError(error.named(paths) + origin) from error
