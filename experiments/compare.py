"""The main job: policies x test windows of a workload on one setup.

    python -m experiments.compare [policies=cache_aware,btb] [setup=70b_h100x4]
        [workload=bursted_synthetic] [params=key=value,...] [windows=5] [seed=0] [out_dir=PATH]
        [causal_kv=true] [copy_model=reference] [policy_kwargs=btb.m=2,dynamo.temperature=0.5]
        [agents=zoo|none|PATH,...]
        [workload=trace workload.path=FILE workload.format=auto workload.window_s=300 ...]
        [workload=plugin workload.factory=MODULE:FUNCTION]
        [allow_seen_windows=false] [overwrite=false]
        [sim.router_view_delay_s=0.05 sim.fault_node_loss_s=30 sim.fault_node_loss_nodes=0 ...]
        [cluster.nodes=[4xH100,4xH100,8xH200]] [cluster.node=4xH100 cluster.n_nodes=4]
        [model.name=NAME model.FIELD=...] [+cluster.gpus.NAME.FIELD=...]

Runs every chosen policy (default: every registered baseline, plus the learned
agents shipped in ``agents/zoo/``; ``agents=none`` leaves them out) on the first
``windows`` test windows of the workload (0 = all of them), prints a table, and
writes to ``out_dir`` (default ``runs/<setup>__<workload>__compare__<seed>__<time>``,
or ``...<time>-2``, ``-3``, ... for runs started in the same second).
``params=key=value,...`` sets the workload generator's parameters, as
``make_dataset`` takes them (rows and folder name the workload with them:
``bursted_synthetic[burst_requests=50]``).
``workload=trace workload.path=FILE`` runs the test windows of a trace file
(the ``workload.*`` options are :class:`envs.workloads.trace_file.TraceOptions`);
its rows are labelled ``trace:<file name>`` and ``results.json`` records the
file's size and sha256 under ``config.workload_file``.
An agent trained on that file is not run on windows that overlap in time those it
was trained or validated on (other ``workload.*`` split options than its training
run's can make them test windows): refused in one line naming the agent, unless
``allow_seen_windows=true`` (then a one-line warning); on a registered workload, a
note gives the trace options that evaluate it on its trace's windows
(:mod:`experiments.trained_on`), and an agent trained on that workload's windows at
other window counts is refused the same way on those of them it trained or
validated on.
``policy_kwargs=POLICY.KEY=VALUE,...`` sets a baseline's constructor setting, or
an agent's (``agents.adapter.AGENT_SETTINGS``: a threshold agent's ``y_tokens``).
The ``sim.`` options set SimConfig options with a default of their own: the
stale router view, faults, tenancy, the cache lifecycle, speculation
(:mod:`experiments._sim_options`, docs/faults.md); with faults on, the table and
the rows also count node losses, re-routed requests and failed copies.

A cluster of one's own is given as on the Hydra commands (``train``, ``evaluate``,
``tune_btb``), with the same names and meanings, and made by the same code
(``experiments.config.cluster_from_options``, which calls ``cluster_of``;
docs/configuration.md): mixed nodes (``cluster.nodes=[4xH100,4xH100,8xH200]``,
brackets optional, instead of ``cluster.node`` and ``cluster.n_nodes``), a model of
one's own (a new ``model.name`` and ModelSpec's fields) and a GPU kind of one's own
(``+cluster.gpus.NAME.<field>=...``, every GpuSpec field; the ``+`` is optional
here). ``setup=`` is the base they change: it gives ``model.name``,
``cluster.node`` and ``cluster.n_nodes``, and each option given replaces its part
(``setup=glm45_h100x4 cluster.nodes=[4xH100,8xH200]`` is glm-4.5 on those two
nodes); ``cluster.node`` or ``cluster.n_nodes`` beside ``cluster.nodes`` is refused,
as on the Hydra commands. A bad value is one line naming the option and where it
came from (``(from the command line)``, or ``(from setup=NAME)`` for the setup's
part). The rows, the table's first line and the folder name the cluster as the
Hydra commands do (``llama-3.3-70b_4xH100_x2+8xH200_x1``; a published setup's
model and cluster by the setup's name), and ``results.json`` records it as they
do: ``config.setup`` (that name), ``config.model``, ``config.cluster`` and
``config.cluster_figures`` (``ClusterSpec.figures()``, every figure). An agent
trained on a cluster of its own that runs on another gets a note with the options
that run it on its own. An agent that cannot run on the cluster (its network's
node count; ``time_unit=reference`` on nodes that prefill at several speeds) is
refused before any run, naming it; the shipped ones ``agents=zoo`` brings that
cannot count reference seconds there are left out instead, with a note naming them:
``results.json`` lists them under ``config.agents_left_out`` (each folder, and why),
not among ``config.agents`` and ``provenance.agent_files`` (the agents run).


* ``results.json``: ``{"rows": [...], "config": {...}, "provenance": {...}}`` (what
  made it: ``experiments.provenance``), one row per (setup,
  workload, policy); TTFT statistics pool every request of every window;
  ``ttft_mean_reduction_pct`` / ``ttft_p95_reduction_pct`` are relative to
  ``baseline`` (cache_aware), which is always run. The last row, ``floor``, is
  a lower bound on every request's TTFT (``envs/sim/floor.py``; TTFT statistics
  only), and ``floor_gap_closed_mean_pct`` / ``_p95_pct`` say how much of btb's gap
  down to it each policy closes (0 = btb, 100 = the floor).
* ``ttft_reduction.png``, ``ttft_cdf.png`` and ``burst_timeline.png`` (one
  window, the first unless ``timeline_window=K`` names another by its position:
  per node queue length over time, warm copies marked); with a
  ``btb/Thresholds-v0`` agent among the policies also ``thresholds_timeline.png``
  (the same window: the cluster's queue and the settings it chose each epoch)
  and ``thresholds_settings.json`` (every window's settings, epoch by epoch).

An ``out_dir`` that holds anything already is refused unless ``overwrite=true``
(which first removes the files above), and so is one another run is writing in;
the default folder is always a new one.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from agents import ZOO, agent_folder, forget_read, zoo_names
from baselines.policy import POLICIES, known_policies, make_policy
from envs.sim.config import DEFAULT_SETUP
from envs.sim.errors import ConfigError, echoed, plural
from envs.workloads.bursted import PUBLISHED_SEED
from envs.workloads.registry import DEFAULT_WORKLOAD
from envs.workloads.trace_options import TRACE_WORKLOAD
from experiments._cli import (
    FROM_COMMAND_LINE,
    TRACE_PATHS,
    UsageError,
    cap_note,
    check_policies,
    check_setups,
    check_workload,
    cluster_help,
    generator_params,
    input_paths,
    main_guard,
    naming_params,
    parse_args,
    parse_value,
    plugin_defaults,
    resolve_workload,
    sim_config_of,
    sim_defaults,
    sim_note,
    split_cluster_options,
    stamp_trace,
    trace_defaults,
    workload_file,
    workload_label,
    workload_params,
)
from experiments._io import claim_run_dir, folder_part, releasing_out_dirs
from experiments._sim_options import HELP as sim_help
from experiments._sim_options import naming_sim_options, split_sim_options, with_sim_options
from experiments.evaluation import (
    DEFAULT_BASELINE,
    check_timeline_window,
    count_windows,
    evaluate_policies,
    split_windows,
)
from experiments.report import (
    CHARTS,
    THRESHOLDS_CHART,
    THRESHOLDS_LOG,
    comparison_table,
    replication_table,
    write_run,
)
from experiments.trained_on import (
    check_seen_windows,
    cluster_notes,
    plugin_notes,
    sibling_notes,
    trace_notes,
)

DEFAULTS: dict[str, Any] = {
    "policies": [],
    "setup": DEFAULT_SETUP,
    "workload": DEFAULT_WORKLOAD,
    "windows": 5,
    "seed": 0,
    "workload_seed": PUBLISHED_SEED,
    "out_dir": "",
    **sim_defaults(),
    "baseline": DEFAULT_BASELINE,
    "policy_kwargs": [],
    "agents": ["zoo"],
    "charts": True,
    "timeline_window": 0,
    "progress": True,
    "params": [],
    **trace_defaults(),
    **plugin_defaults(),
    "allow_seen_windows": False,
    "overwrite": False,
}

OUTPUTS = ("results.json", *CHARTS, THRESHOLDS_CHART, THRESHOLDS_LOG)
"""What a comparison run writes in its folder (``overwrite=true`` clears these)."""


_BASIC = {"bool": False, "int": 0, "float": 0.0, "str": ""}
"""The setting types :func:`_setting_value` parses text to, by their annotation's name
(an example value of each, for :func:`~experiments._cli.parse_value`)."""


def _declared_kinds(param: inspect.Parameter) -> tuple[list[str], bool]:
    """The types a constructor setting declares, among :data:`_BASIC` ("bool", "int",
    ...; ``[]`` for a type of another kind or none declared), and whether it takes
    None. An annotation is the declaration (``x: float = 64`` is a float); without
    one, the default's type is, and None is taken (nothing said otherwise)."""
    annotation = param.annotation
    if annotation is inspect.Parameter.empty:
        default = param.default
        kind = next((k for k, v in _BASIC.items() if type(default) is type(v)), None)
        return ([kind] if kind else []), kind is None or default is None
    if not isinstance(annotation, str):
        annotation = inspect.formatannotation(annotation)
    text = annotation.replace(" ", "")
    if text.startswith("Optional[") and text.endswith("]"):  # Optional[int]: int | None
        text = text[len("Optional[") : -1] + "|None"
    parts = text.split("|")
    kinds = [part for part in _BASIC if part in parts]
    takes_none = "None" in parts or "Any" in parts or param.default is None
    return kinds, takes_none


def _literal(text: str) -> Any:
    """Text for a setting of no type :func:`_setting_value` knows, read as YAML reads
    a scalar (as a Hydra command line gives it): a bool, None, an int, a float, or
    the text itself."""
    low = text.lower()
    if low in {"true", "false"}:
        return low == "true"
    if low in {"none", "null"}:
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _setting_value(
    policy: str,
    key: str,
    value: Any,
    item: str,
    agents: Mapping[str, Any] | None = None,
    origin: str = "",
) -> Any:
    """``value`` as the policy's constructor setting ``key`` takes it (an agent's:
    as its env takes it, among ``AgentPolicy.setting_names``). One rule for both
    kinds of command: text (every value of the ``key=value`` commands; a Hydra
    command's string) is parsed to the setting's declared type: bools strictly
    (true/false/yes/no/on/off/1/0), ints, floats, a str as written (``none`` is the
    string 'none'); ``none`` / ``null`` is None only where the type takes None. A
    value YAML typed already (a Hydra command's number, bool or null) is checked
    against the type instead (a whole float is an int, 0 / 1 a bool; a number is no
    str: quoted, it is text). ``origin``: where the value came from, `` (from the
    command line)``, as a value it refuses is said."""
    agent = (agents or {}).get(policy)
    if agent is not None:
        from agents.adapter import AGENT_SETTINGS

        names = agent.setting_names()
        if key not in names:
            raise UsageError(
                f"policy_kwargs: {echoed(item)}: agent {policy} has no setting {key!r} "
                f"(settings: {', '.join(names) or '-'})"
            )
        factory: Any = AGENT_SETTINGS[agent.spec.env][0]
    else:
        factory = POLICIES.get(policy)
    text = isinstance(value, str)
    if factory is None:
        return _literal(value) if text else value
    params = inspect.signature(factory).parameters
    if key not in params:
        if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
            return _literal(value) if text else value
        known = ", ".join(k for k, p in params.items() if p.kind is p.POSITIONAL_OR_KEYWORD)
        raise UsageError(
            f"policy_kwargs: "
            f"{echoed(item)}: {policy} has no setting {key!r} (settings: {known or '-'})"
        )
    kinds, takes_none = _declared_kinds(params[key])
    if value is None or (text and value.lower() in {"none", "null"}):
        if takes_none:
            return None
        if value is None and kinds:  # YAML's null for a setting that takes no None
            raise UsageError(
                f"policy_kwargs: {policy}.{key}=None is not a valid {' | '.join(kinds)}{origin}"
            )
    if not kinds:  # a type of another kind: read as YAML would
        return _literal(value) if text and value is not None else value
    for kind in kinds:
        if text:
            try:
                return parse_value(value, _BASIC[kind])
            except ValueError:
                continue
        if kind == "bool" and isinstance(value, bool):
            return value
        if kind == "bool" and type(value) is int and value in (0, 1):
            return bool(value)  # YAML's 0 / 1, as the key=value commands' text 0 / 1
        if (
            kind in ("int", "float")
            and isinstance(value, int | float)
            and not isinstance(value, bool)
        ):
            if kind == "float":
                return float(value)
            if float(value).is_integer():
                return int(value)
    hint = ""
    if "str" in kinds and not text:  # Hydra typed it: quoted, it stays text
        hint = f" (to give it as text, quote it: +policy_kwargs.{policy}.{key}='{value}')"
    raise UsageError(
        f"policy_kwargs: {policy}.{key}="
        f"{echoed(value)} is not a valid {' | '.join(kinds)}{hint}{origin}"
    )


def _agents_named(policy: str, agents: Mapping[str, Any] | None) -> list[str]:
    """The labels of the agents run that ``policy`` names: its own label, or, for a
    name several agents share (each labelled apart: ``jobs.agent_labels``), every
    one saved under that name."""
    agents = agents or {}
    if policy in agents:
        return [policy]
    return [label for label, agent in agents.items() if agent.spec.name == policy]


def _check_run(
    policy: str, where: str, policies: Sequence[str], agents: Mapping[str, Any] | None
) -> None:
    if policy not in policies and not _agents_named(policy, agents):
        from agents import zoo_names
        from baselines.policy import POLICIES

        if policy in POLICIES:
            said = f"baseline {echoed(policy)}, which is not among the baselines run"
        elif policy in zoo_names():
            said = f"agent {echoed(policy)}, which is not among the agents run"
        else:
            said = f"{echoed(policy)}, which is no baseline nor agent run"
        run = [*policies, *(agents or {})]
        raise UsageError(f"{where} names {said} (policies: {', '.join(run)})")


def policy_kwargs(
    items: Sequence[str], policies: Sequence[str], agents: Mapping[str, Any] | None = None
) -> dict[str, dict[str, Any]]:
    """``["btb.m=2", "dynamo.temperature=0.5"]`` -> ``{"btb": {"m": 2}, ...}``, each
    value parsed to the type of the policy's setting; ``agents`` (name -> the
    ``AgentPolicy`` run) may be named too, with their own settings."""
    out: dict[str, dict[str, Any]] = {}
    given: dict[tuple[str, str], str] = {}
    for item in items:
        target, sep, value = item.partition("=")
        policy, dot, key = target.partition(".")
        if not sep or not dot or not policy or not key:
            raise UsageError(
                f"policy_kwargs: expected POLICY.KEY=VALUE, got {echoed(item)}{FROM_COMMAND_LINE}"
            )
        _check_run(policy, f"policy_kwargs: {echoed(item)}", policies, agents)
        for name in _agents_named(policy, agents) if policy not in policies else [policy]:
            if (name, key) in given:  # the last one would win without a word
                raise UsageError(
                    f"policy_kwargs: {name}.{key} is given twice ({given[name, key]}, then {item})"
                )
            given[name, key] = item
            out.setdefault(name, {})[key] = _setting_value(
                name, key, value, item, agents, FROM_COMMAND_LINE
            )
    return out


def policy_settings(
    settings: Mapping[str, Any], policies: Sequence[str], agents: Mapping[str, Any] | None = None
) -> dict[str, dict[str, Any]]:
    """``{"btb": {"y_tokens": 8192}}`` (a Hydra command's ``+policy_kwargs.btb.y_tokens=
    8192``, typed already) checked as :func:`policy_kwargs` checks ``btb.y_tokens=8192``,
    a value refused said with where it came from (``config.value_origin``)."""
    from experiments.config import value_origin

    out: dict[str, dict[str, Any]] = {}
    for policy, keys in settings.items():
        if not isinstance(keys, Mapping):
            raise UsageError(
                f"policy_kwargs.{policy} must hold settings (+policy_kwargs.{policy}.KEY="
                f"VALUE), got {echoed(keys)}"
            )
        _check_run(policy, f"policy_kwargs.{policy}", policies, agents)
        for name in _agents_named(policy, agents) if policy not in policies else [policy]:
            for key, value in keys.items():
                item = f"{policy}.{key}={echoed(value)}"
                origin = value_origin(f"policy_kwargs.{policy}.{key}")
                out.setdefault(name, {})[key] = _setting_value(
                    name, key, value, item, agents, origin
                )
    return out


def configure_agents(
    agents: Mapping[str, Any], settings: Mapping[str, Mapping[str, Any]]
) -> dict[str, dict[str, Any]]:
    """Give each agent its settings (parsed by :func:`policy_kwargs` or
    :func:`policy_settings`); the baselines' settings are returned."""
    for name, agent in agents.items():
        if name in settings:
            try:
                agent.configure(**settings[name])
            except ValueError as error:
                raise UsageError(f"policy_kwargs: {name}: {error}") from None
    return {name: dict(keys) for name, keys in settings.items() if name not in agents}


def check_policy_nodes(
    policies: Mapping[str, Any], given: Mapping[str, Mapping[str, Any]], n_nodes: int
) -> None:
    """Each baseline given settings (``policy_kwargs``) against the cluster's
    ``n_nodes``, before any run (``Policy.check_nodes``: btb's M): a refusal names the
    policy and where its settings came from (``policy 'btb' (policy_kwargs): btb.m = 4
    copies exceeds the cluster's 2 nodes ...``). It was said at the first window's
    reset, after the run had begun."""
    for name, policy in policies.items():
        if name in given:
            try:
                policy.check_nodes(n_nodes)
            except ValueError as error:
                raise ConfigError(f"policy {name!r} (policy_kwargs): {error}") from None


def resolve_policies(options: dict[str, Any]) -> list[str]:
    names = list(options["policies"]) or list(POLICIES)
    unknown = [n for n in names if n not in POLICIES]
    if unknown and unknown[0] in zoo_names():
        raise UsageError(
            f"policies: {echoed(unknown[0])} is a shipped agent, not a baseline: pass it as "
            f"agents={unknown[0]} (policies= names baselines only)"
        )
    check_policies("experiments.compare", unknown)
    baseline = options["baseline"]
    if baseline and baseline not in POLICIES:
        raise UsageError(
            f"experiments.compare: baseline={echoed(baseline)} is not a policy"
            f"{FROM_COMMAND_LINE}; {known_policies()}"
        )
    if baseline and baseline not in names:
        names.insert(0, baseline)
    return names


def resolve_agents(items: Sequence[str]) -> list[Path]:
    """Agent checkpoint folders: ``zoo`` means every agent shipped in agents/zoo/,
    ``none`` (or nothing) none; anything else is a folder, or the name of a shipped
    agent (``ppo_thresholds_spread`` for ``agents/zoo/ppo_thresholds_spread``)."""
    folders: list[Path] = []
    typed: list[str] = []  # the item that named each folder
    for item in items:
        if item == "none":
            continue
        if item == "zoo":
            folders += [ZOO / name for name in zoo_names()]
            typed += [item] * len(zoo_names())
            continue
        folder = agent_folder(item)
        if folder is None:
            from agents.algorithms import run_folder_hint

            raise UsageError(
                f"agents: {item!r} is not an agent checkpoint (no agent.json there"
                f"{run_folder_hint(item)}) nor a shipped agent's name (agents/zoo/: "
                f"{', '.join(zoo_names())})"
            )
        folders.append(folder)
        typed.append(item)
    check_folders_once("agents", typed, folders)
    return folders


def check_folders_once(field: str, items: Sequence[str], folders: Sequence[Path]) -> None:
    """Each agent folder once: ``items[i]`` (as typed) names ``folders[i]``. Two
    spellings of one folder (``ppo_thresholds`` and ``agents/zoo/ppo_thresholds``)
    would run it twice: refused, naming both."""
    seen: dict[Path, str] = {}
    for item, folder in zip(items, folders):
        where = folder.resolve()
        if where in seen:
            first = seen[where]
            said = f"{item!r} twice" if first == item else f"{first!r} and {item!r}"
            raise UsageError(f"{field}: {said} name one agent folder ({where}): name it once")
        seen[where] = item


def default_out_dir(options: dict[str, Any], experiment: str, label: str = "") -> Path:
    """``runs/<setup>__<workload>__<experiment>__<seed>__<time>``; ``label`` names the
    workload (a trace's ``trace:<file>`` becomes ``trace-<file>``)."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    workload = folder_part(label or options["workload"])
    return Path("runs") / (
        f"{options.get('setup', 'all')}__{workload}__{experiment}__{options['seed']}__{stamp}"
    )


@releasing_out_dirs
def main(argv: list[str] | None = None) -> dict[str, Any]:
    argv, sim_options = split_sim_options("experiments.compare", argv)
    argv, cluster_given, cluster_added = split_cluster_options("experiments.compare", argv)
    options = parse_args(
        "experiments.compare",
        DEFAULTS,
        argv,
        (
            "windows=0 runs every test window; params= sets a registered workload's "
            "generator parameters, as make_dataset's params= does (evaluate and train: "
            "+workload.params.NAME)",
            *sim_help,
            *cluster_help(),
        ),
    )
    options["workload"] = resolve_workload("experiments.compare", options)
    check_workload("experiments.compare", options["workload"])
    check_setups("experiments.compare", [options["setup"]])
    from experiments.config import cluster_from_options, setup_label

    # the setup, changed by the options of a cluster of one's own (as on the Hydra commands)
    built, cluster = cluster_from_options(
        "experiments.compare", options["setup"], cluster_given, cluster_added
    )
    setup = setup_label(built)  # what the rows, the folder and results.json call it
    n_nodes = len(cluster.nodes)
    for key in ("seed", "workload_seed"):
        if options[key] < 0:
            raise UsageError(
                f"experiments.compare: {key} must be >= 0, got "
                f"{echoed(options[key], quoted=False)}{FROM_COMMAND_LINE}"
            )
    if options["windows"] < 0:
        raise UsageError(
            f"experiments.compare: windows must be >= 0 (0 = all test windows), "
            f"got {echoed(options['windows'], quoted=False)}{FROM_COMMAND_LINE}"
        )
    params = workload_params("experiments.compare", options, [cluster.model])
    generator = generator_params(
        "experiments.compare",
        options["params"],
        "compare runs a workload's own split; evaluate takes +workload.params.train_windows=N",
    )
    if "train_streams" in generator:  # (no generator has the field: a StopIteration below)
        raise UsageError(
            f"experiments.compare: params=train_streams={generator['train_streams']}: "
            "train_streams is how train windows are drawn, not a generator parameter "
            f"(compare runs test windows, the same either way){FROM_COMMAND_LINE}"
        )
    if generator:  # a registered workload's generator parameters, as make_dataset takes them
        if params:
            raise UsageError(
                "experiments.compare: params= sets a generator's parameters; "
                "workload=trace takes workload.* options instead"
            )
        from envs.workloads.registry import configure

        with naming_params("experiments.compare", generator, options["workload"]):
            scenario = configure(options["workload"], None, None, None, **generator)
        # as the generator took them (040 is 40), as a Hydra command's rows name them
        params = {
            key: next(
                list(value) if isinstance(value, tuple) else value
                for family in scenario.families
                if hasattr(family.config, key)
                for value in [getattr(family.config, key)]
            )
            for key in generator
        }
    shown = workload_label(options["workload"], params)
    names = resolve_policies(options)
    agent_dirs = resolve_agents(options["agents"])
    config = sim_config_of("experiments.compare", options["causal_kv"], options["copy_model"])
    with naming_sim_options(sim_options):
        config = with_sim_options(config, sim_options)
    agents: dict[str, Any] = {}
    left_out_dirs: dict[str, str] = {}  # shipped agents agents=zoo brought, not run: why
    if agent_dirs:
        import torch

        from agents.adapter import AgentPolicy
        from experiments.jobs import agent_labels

        torch.set_num_threads(1)  # tiny networks, one decision at a time: threads only add overhead
        loaded = [AgentPolicy.load(folder) for folder in agent_dirs]
        labels = agent_labels([a.name for a in loaded], [str(f) for f in agent_dirs])
        left_out: list[tuple[str, str]] = []  # shipped agents agents=zoo brought, not run
        # what agents=zoo brings (a folder of it also named is refused: resolve_agents)
        brought = {ZOO / name for name in zoo_names()} if "zoo" in options["agents"] else set()
        for folder, agent, label in zip(list(agent_dirs), loaded, labels, strict=True):
            if label in names:
                raise UsageError(f"agent {folder} is named {label!r}, like a policy already run")
            agent.name = label  # same-named agents from different folders stay apart
            agent.check_nodes(n_nodes)  # its network's node count: refused, whoever named it
            try:
                agent.check_cluster(cluster, config)  # before any run: the speeds it counts in
            except ValueError as error:
                if folder not in brought:  # named by the user: refused
                    raise
                left_out.append((label, str(error).partition(": ")[2]))
                agent_dirs.remove(folder)
                forget_read(folder)  # (provenance.agent_files: the agents run)
                left_out_dirs[str(folder)] = left_out[-1][1]
                continue
            agents[label] = agent
        if left_out:  # (each for one reason: time_unit=reference on nodes of several speeds)
            print(
                f"note: agents=zoo leaves out {', '.join(label for label, _ in left_out)}, "
                f"which cannot run on {setup}: {left_out[0][1]}; agents= naming one refuses it"
            )
    limit = options["windows"] or None
    workload = options["workload"]
    trained_in = {label: str(folder) for label, folder in zip(agents, agent_dirs, strict=True)}
    seen = check_seen_windows(
        agents,
        trained_in,
        workload,
        params,
        "test",
        limit,
        options["allow_seen_windows"],
        seed=options["workload_seed"],
    )
    if workload != TRACE_WORKLOAD:
        for note in trace_notes(agents, trained_in, shown, seen):
            print(note)
    for note in cluster_notes(agents, cluster, setup, "experiments.compare with "):
        print(note)
    for note in plugin_notes(agents, trained_in, workload):
        print(note)
    seed = options["workload_seed"]
    for note in sibling_notes(agents, trained_in, workload, params, seed, "test", limit):
        print(note)
    kwargs = policy_kwargs(options["policy_kwargs"], names, agents)
    baseline_kwargs = configure_agents(agents, kwargs)
    policies = {name: make_policy(name, **baseline_kwargs.get(name, {})) for name in names}
    check_policy_nodes(policies, baseline_kwargs, n_nodes)
    policies.update(agents)
    with naming_sim_options(sim_options):
        config.check_cluster(n_nodes)  # before any window runs
    # more than the workload has: said when asked for, not for the default on a short trace
    asked = options["windows"] != DEFAULTS["windows"]
    n_windows = count_windows(workload, limit, options["workload_seed"], params, asked)
    try:
        timeline = check_timeline_window(options["timeline_window"], n_windows, "timeline_window")
    except ValueError as error:
        raise UsageError(f"{error}{FROM_COMMAND_LINE}") from None
    if any(agent.spec.env_kwargs.get("y_tokens") for agent in agents.values()):
        # an agent's Y against the workload's blocks (all its windows share them)
        first = next(split_windows(workload, 1, options["workload_seed"], params=params), None)
        for agent in agents.values():
            if first is not None:
                agent.check_workload(first)
    out_dir = claim_run_dir(
        options["out_dir"],
        default_out_dir({**options, "setup": setup}, "compare", shown),
        "experiments.compare: out_dir",
        OUTPUTS,
        options["overwrite"],
        input_paths(options.get),
    )
    stamp_trace(workload, params)  # (checked as the results are written)

    bar = None
    if options["progress"]:
        from tqdm import tqdm

        bar = tqdm(total=n_windows * len(policies), desc="compare", unit="run")
    started = time.perf_counter()
    try:
        with naming_params(
            "experiments.compare", generator, options["workload"]
        ):  # (a window the generator fails)
            runs = evaluate_policies(
                policies,
                cluster,
                split_windows(workload, limit, options["workload_seed"], params=params),
                config,
                seed=options["seed"],
                workload=shown,
                baseline=options["baseline"],
                progress=bar.update if bar is not None else None,
                floor=True,
                trace_window=timeline,
                setup_name=setup,
            )
    finally:
        if bar is not None:
            bar.close()
    rows = [run.row for run in runs]
    print(
        f"{setup} · {shown} · {plural(n_windows, 'test window')}"
        + cap_note("windows", limit, every="0")
        + sim_note(config)
    )
    print(comparison_table(rows, options["baseline"]))
    if replication := replication_table(rows):
        print(replication)
    result = {
        "rows": rows,
        "config": {
            **options,
            "setup": setup,
            "model": OmegaConf.to_container(built.model),
            "cluster": OmegaConf.to_container(built.cluster),
            "cluster_figures": cluster.figures(),
            "policies": names,
            "agents": [str(folder) for folder in agent_dirs],
            "agents_left_out": left_out_dirs,
            "policy_kwargs": kwargs,
            "sim": {"causal_kv": config.causal_kv, "copy_model": config.copy_model, **sim_options},
            "windows_run": n_windows,
            "window_names": [w.window for w in runs[0].windows],
            "wall_s": time.perf_counter() - started,
            "out_dir": str(out_dir),
            **workload_file(workload, params),
        },
    }
    for path in write_run(out_dir, result, runs, options["baseline"], options["charts"]):
        print(f"wrote {path}")
    return result


if __name__ == "__main__":
    raise SystemExit(main_guard(main, TRACE_PATHS))
