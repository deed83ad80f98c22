"""Simulator settings and the cluster description."""

from __future__ import annotations

import contextlib
import dataclasses
import math
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from envs.sim.checks import check_int, checked_number, is_number
from envs.sim.errors import ConfigError, SettingWarning, caller_stacklevel, echoed, plural
from envs.sim.timing import (
    DEFAULT_MBU,
    DEFAULT_MFU,
    GpuSpec,
    ModelSpec,
    NodeSpec,
    model_preset,
    parse_node,
)

# A number field's rule for SimConfig._check_numbers: name, low, high, low open,
# high open, finite (checked_number's arguments)
NumberRule = tuple[str, float, float, bool, bool, bool]
COPY_MODELS = ("reference", "contention")
CACHE_CAPACITIES = ("headroom", "budget")
MATCH_TIERS = ("hbm", "hbm_ram")
LRU_UNITS = ("run", "block")
RECLAIM_ORDERS = ("lru", "replicas_first")
MAX_NODES = 4096
"""The most nodes a cluster holds: far above a serving cluster of the published
setups, below what a typo's 10**12 would try to allocate."""

# The accounting settings whose default follows the KV model: btb-gym's physics
# under causal KV, the reference simulator's under causal_kv=False.
KV_MODEL_DEFAULTS: dict[bool, dict[str, bool | str]] = {
    True: {
        "hbm_hit_load": True,
        "one_token_decode_step": False,
        "cache_capacity": "headroom",
        "match_tiers": "hbm",
        "lru_unit": "run",
        "decode_overshoot": False,
    },
    False: {
        "hbm_hit_load": False,
        "one_token_decode_step": True,
        "cache_capacity": "budget",
        "match_tiers": "hbm_ram",
        "lru_unit": "block",
        "decode_overshoot": True,
    },
}
_CHOICES = {"cache_capacity": CACHE_CAPACITIES, "match_tiers": MATCH_TIERS, "lru_unit": LRU_UNITS}


@dataclass(frozen=True)
class SimConfig:
    """How the cluster is simulated. Defaults are btb-gym's causal model.

    The accounting settings from ``hbm_hit_load`` to ``decode_overshoot`` default
    to None, which means "as the KV model has it": btb-gym's physics under
    ``causal_kv=True``, the reference simulator's under ``causal_kv=False``
    (``KV_MODEL_DEFAULTS``; :meth:`reference` builds the latter). Set one to
    switch it alone. After construction every field holds its value, never None.
    What each setting means for the physics: docs/physics.md.
    """

    causal_kv: bool = True
    """KV is usable (and copyable) only once computed or landed; False restores
    the reference behaviour (a request's blocks are resident from admission)."""
    copy_model: str = "reference"
    """"reference": a warm copy occupies the target node's timeline (the BTB write-up's model);
    "contention": concurrent copies share source and target NICs fairly."""
    max_batch: int = 256
    """Most sequences a node runs at once."""
    mfu: float = DEFAULT_MFU
    """Achieved fraction of peak FLOP/s in prefill."""
    mbu: float = DEFAULT_MBU
    """Achieved fraction of HBM bandwidth in decode."""
    disk_tier: bool = False
    """Keep blocks evicted from a full host RAM on local NVMe (unbounded). Only
    with a finite ``host_ram_bytes``: an unbounded host RAM never spills."""
    host_ram_bytes: float = math.inf
    """Host RAM for KV per node; inf (the reference) means unbounded. Realism option."""
    transfer_latency_s: float = 0.0
    """Fixed latency added to every KV transfer (RDMA copies, RAM and disk loads).
    Realism option; the contention copy model is usually run with a few microseconds."""
    attention_flops: bool = False
    """Add attention FLOPs (growing with context) to prefill. Realism option."""
    chunked_prefill_tokens: int = 0
    """Split prefills into chunks of this many tokens with one decode step of the
    running batch between chunks; a sequence whose last token comes out at one of
    those steps finishes (and frees its KV) there. 0 (the reference) prefills in
    one go. Realism option."""
    hbm_hit_load: bool | None = None
    """Charge a prefix hit in HBM its bytes / HBM bandwidth of reuse time (causal
    default); False charges nothing for HBM, only for runs loaded from RAM or disk
    (reference default)."""
    one_token_decode_step: bool | None = None
    """A request with one output token runs one decode step after its prefill,
    holding its KV and counting as load until the step ends (reference default);
    False finishes it at the end of its prefill (causal default). Its TTFT is the
    prefill's end either way."""
    cache_capacity: str | None = None
    """HBM the prefix cache may hold: "headroom", the KV budget minus the running
    sequences' reservations (causal default), or "budget", the whole KV budget
    (reference default)."""
    match_tiers: str | None = None
    """What cache_aware (and BTB when it falls back to it) counts as a node's
    matched prefix: "hbm" (causal default) or "hbm_ram", the leading run cached in
    HBM and host RAM together (reference default)."""
    lru_unit: str | None = None
    """LRU bookkeeping of the prefix cache: "run", a hit refreshes the whole
    radix-tree run it reaches into (causal default), or "block", a hit refreshes
    exactly the blocks it used, so the unused rest of a run ages and is evicted
    first (reference default). Either way eviction takes exactly the blocks it
    needs, deepest first, so what stays cached is a prefix."""
    decode_overshoot: bool | None = None
    """A quirk of the reference loop (reference default; causal default False): at
    each arrival, a node whose decode segment ends within the decode step in
    progress finishes that step (its sequences complete, freed KV admits queued
    requests) before the router decides, so the router sees the node as it will
    be after the step, not as it is at the arrival."""

    copy_landing_check: bool = True
    """A warm copy lands only if its source still holds the prefix in HBM, its
    target the blocks the copy did not send, and both serve the same model version
    (docs/physics.md, "Warm copies (RDMA)"); otherwise it lands nothing and counts as lost.
    False lands it whatever happened meanwhile: btb-gym before 2026-12-05, kept so
    that the agents trained then (agents/zoo/) reproduce bit for bit. KV can then
    appear on a node that no node computed."""

    # -- stale router view and faults (envs/sim/view.py, envs/sim/faults.py;
    #    docs/faults.md). All off by default.
    router_view_delay_s: float = 0.0
    """Policies and the observation see each node's cache as it was this many
    seconds ago (KV events reach the router late); loads, queues and copies in
    flight stay live. 0: the live cache."""
    fault_node_loss_s: tuple[float, ...] = ()
    """Times (s) of scheduled node losses, one per entry of ``fault_node_loss_nodes``."""
    fault_node_loss_nodes: tuple[int, ...] = ()
    """The node lost at each time of ``fault_node_loss_s``."""
    fault_node_loss_rate_per_s: float = 0.0
    """Random node losses per second over the cluster (a Poisson process until the
    last arrival; the node uniformly among those up), drawn from the faults' stream
    (see ``fault_seed``)."""
    fault_node_down_s: float = math.inf
    """Seconds a lost node stays down before it comes back, empty; inf: never."""
    fault_copy_fail_prob: float = 0.0
    """Probability that a warm copy fails: its bytes move, but nothing lands."""
    fault_copy_slow_prob: float = 0.0
    """Probability that a warm copy is slow (drawn when it is issued): it moves its
    bytes ``fault_copy_slowdown`` times slower than its link would."""
    fault_copy_slowdown: float = 1.0
    """How many times longer a slow copy's bytes take (>= 1)."""
    fault_nic_down_s: tuple[float, ...] = ()
    """Times (s) a node's RDMA NIC goes down, one per entry of ``fault_nic_down_nodes``:
    its copies in flight fail and warm copies from or to it are refused until it is
    back, ``fault_nic_down_for_s`` later. The node itself keeps serving."""
    fault_nic_down_nodes: tuple[int, ...] = ()
    """The node whose NIC goes down at each time of ``fault_nic_down_s``."""
    fault_nic_down_for_s: float = 1.0
    """Seconds a NIC stays down."""
    fault_seed: int = 0
    """Selects the faults' own random stream (random losses, failed and slow copies)
    among those of the simulator's seed: the stream derives from both
    (``envs.sim.faults.fault_rng``), so each window and episode meets its own
    faults, and another ``fault_seed`` gives other faults on the same windows."""
    # --- tenancy: model versions and rolling upgrades (envs.sim.tenancy, docs/tenancy.md)
    model_versions: tuple[str, ...] = ()
    """The model version each node serves at the start, one per node in node order
    (empty: every node serves "v1"). A node's KV counts only for its own version:
    warm copies between nodes of different versions are refused."""
    upgrade_at_s: tuple[float, ...] = ()
    """A rolling upgrade: node i starts upgrading to ``upgrade_version`` at
    ``upgrade_at_s[i]`` seconds (nodes past the list, or at inf, never do). It
    drains (admits nothing new, its running sequences finish), drops its KV and
    serves its queue under the new version. Empty (the default): no upgrade."""
    upgrade_version: str = "v2"
    """The version upgraded nodes serve."""
    upgrade_downtime_s: float = 0.0
    """Seconds an upgraded node loads its new weights before it serves again."""
    # ---- cache lifecycle (envs/sim/lifecycle.py; docs/cache_actions.md)
    pin_budget_fraction: float = 0.25
    """Most of a node's KV budget that pinned prefixes may hold (``Simulator.pin``
    refuses a pin beyond it); 0 refuses every pin. Pins happen only when a policy
    asks for them."""
    replica_ttl_s: float = math.inf
    """A warm copy's blocks that no request used for this long are reclaimed to
    host RAM; inf (the default) keeps them until LRU evicts them."""
    reclaim_order: str = "lru"
    """What HBM pressure evicts first: "lru", the least recently used leaves
    whoever wrote them (the default), or "replicas_first", replica leaves (warm
    copies, speculative prefills) before request-computed ones, each by LRU."""
    # -- speculative prefill (Simulator.speculate; docs/cache_actions.md) --
    speculative_chunk_tokens: int = 2048
    """Speculative prefill runs in chunks of this many tokens (rounded down to whole
    blocks, at least one): a real request arriving at a speculating node waits at
    most for the chunk in progress. Used only when a policy calls speculate."""

    @classmethod
    def reference(cls, **overrides: Any) -> SimConfig:
        """The reference (Infer-Sim) model: ``causal_kv=False`` and every accounting
        setting at its reference default, unless overridden."""
        return cls(causal_kv=False, **overrides)

    def __post_init__(self) -> None:
        # numpy scalars (e.g. from np.linspace sweeps) are stored as Python values
        if isinstance(self.causal_kv, np.bool_):
            object.__setattr__(self, "causal_kv", bool(self.causal_kv))
        if isinstance(self.causal_kv, bool):
            for name, value in KV_MODEL_DEFAULTS[self.causal_kv].items():
                if getattr(self, name) is None:
                    object.__setattr__(self, name, value)
        for name in (
            "causal_kv",
            "disk_tier",
            "attention_flops",
            "hbm_hit_load",
            "one_token_decode_step",
            "decode_overshoot",
            "copy_landing_check",
        ):
            value = getattr(self, name)
            if isinstance(value, np.bool_):
                object.__setattr__(self, name, bool(value))
            elif not isinstance(value, bool):  # "false" would be truthy
                raise ConfigError.about(
                    f"sim.{name}", f"must be true or false (a bool), got {echoed(value)}"
                )
        for name in ("max_batch", "chunked_prefill_tokens"):
            value = getattr(self, name)
            if isinstance(value, np.integer):
                object.__setattr__(self, name, int(value))
        inf = math.inf
        self._check_numbers(
            (
                ("mfu", 0, 1, True, False, False),
                ("mbu", 0, 1, True, False, False),
                ("host_ram_bytes", 0, inf, False, False, False),  # inf: unbounded
                ("transfer_latency_s", 0, inf, False, False, True),
            ),
            type_apart=True,
        )
        for name, choices in (("copy_model", COPY_MODELS), *_CHOICES.items()):
            value = getattr(self, name)
            if value not in choices:
                raise ConfigError.about(
                    f"sim.{name}", f"must be one of {', '.join(choices)}, got {echoed(value)}"
                )
        check_int("sim.max_batch", self.max_batch, 1, ConfigError)
        check_int("sim.chunked_prefill_tokens", self.chunked_prefill_tokens, 0, ConfigError)
        if self.disk_tier and self.host_ram_bytes == inf:  # it would never be used
            raise ConfigError.about(
                "sim.disk_tier",
                "needs a finite {host_ram_bytes} (blocks spill to disk from a full host RAM; "
                "an unbounded one never fills)",
                "host_ram_bytes",
            )
        self._check_view_and_faults()
        self._check_tenancy()
        self._check_cache_life()
        self._check_speculation()

    @property
    def faults_on(self) -> bool:
        """Whether any fault option is set (envs/sim/faults.py)."""
        return bool(
            self.fault_node_loss_s
            or self.fault_node_loss_rate_per_s
            or self.fault_copy_fail_prob
            or self.fault_copy_slow_prob
            or self.fault_nic_down_s
        )

    def _check_view_and_faults(self) -> None:
        """The stale-view and fault options (stored as plain Python values)."""
        inf = math.inf
        self._check_numbers(
            (
                ("router_view_delay_s", 0, inf, False, False, True),
                ("fault_node_loss_rate_per_s", 0, inf, False, False, True),
                ("fault_node_down_s", 0, inf, True, False, False),  # inf: never back
                ("fault_copy_fail_prob", 0, 1, False, False, False),
                ("fault_copy_slow_prob", 0, 1, False, False, False),
                ("fault_copy_slowdown", 1, inf, False, False, True),
                ("fault_nic_down_for_s", 0, inf, True, False, True),
            )
        )
        check_int("sim.fault_seed", self.fault_seed, 0, ConfigError)
        self._check_schedule("fault_node_loss_s", "fault_node_loss_nodes")
        self._check_schedule("fault_nic_down_s", "fault_nic_down_nodes")
        idle = (  # a setting away from its default, and what it needs to do anything
            ("fault_copy_slowdown", 1.0, self.fault_copy_slow_prob,
             f"while sim.fault_copy_slow_prob is {self.fault_copy_slow_prob!r} (the share "
             "of copies it slows)"),
            ("fault_node_down_s", inf,
             self.fault_node_loss_s or self.fault_node_loss_rate_per_s,
             "while no node is lost (sim.fault_node_loss_s, sim.fault_node_loss_rate_per_s)"),
            ("fault_nic_down_for_s", 1.0, self.fault_nic_down_s,
             "while no NIC goes down (sim.fault_nic_down_s)"),
            ("fault_seed", 0,
             self.fault_node_loss_rate_per_s or self.fault_copy_fail_prob
             or self.fault_copy_slow_prob,
             "while no fault is drawn at random (sim.fault_node_loss_rate_per_s, "
             "sim.fault_copy_fail_prob, sim.fault_copy_slow_prob)"),
        )  # fmt: skip
        _warn_idle(idle, self)

    def _check_schedule(self, times_name: str, nodes_name: str) -> None:
        """A fault schedule: finite times >= 0 and a node index for each."""
        times = getattr(self, times_name)
        nodes = getattr(self, nodes_name)
        if not _is_list(times) or not all(is_number(t) and 0 <= t < math.inf for t in times):
            raise ConfigError.about(
                f"sim.{times_name}", f"must be a list of finite times >= 0, got {echoed(times)}"
            )
        if not _is_list(nodes) or not all(is_number(j, integer=True) and j >= 0 for j in nodes):
            raise ConfigError.about(
                f"sim.{nodes_name}", f"must be a list of node indices, got {echoed(nodes)}"
            )
        if len(times) != len(nodes):
            raise ConfigError.about(
                f"sim.{times_name}",
                f"has {plural(len(times), 'time')} but {{{nodes_name}}} has "
                f"{plural(len(nodes), 'node')}: "
                "one node for each time",
                nodes_name,
            )
        object.__setattr__(self, times_name, tuple(float(t) for t in times))
        object.__setattr__(self, nodes_name, tuple(int(j) for j in nodes))

    def check_cluster(self, n_nodes: int) -> None:
        """The checks that need the cluster's size: one model version per node, at
        most one upgrade time per node, fault schedules naming nodes of the cluster.
        The simulator runs them when it starts; a command runs them before its first
        window, so a bad value stops it before any work."""
        if self.model_versions and len(self.model_versions) != n_nodes:
            raise ConfigError.about(
                "sim.model_versions",
                f"names {plural(len(self.model_versions), 'version')} for a cluster of "
                f"{plural(n_nodes, 'node')}; give one per node",
            )
        if len(self.upgrade_at_s) > n_nodes:
            raise ConfigError.about(
                "sim.upgrade_at_s",
                f"has {plural(len(self.upgrade_at_s), 'time')} for a cluster of "
                f"{plural(n_nodes, 'node')}; give at most one per node",
            )
        for name in ("fault_node_loss_nodes", "fault_nic_down_nodes"):
            for k, j in enumerate(getattr(self, name)):
                if j >= n_nodes:
                    raise ConfigError.about(
                        f"sim.{name}[{k}]",
                        f"= {j} is not a node of the cluster (nodes 0..{n_nodes - 1})",
                    )

    def _check_tenancy(self) -> None:
        """The model-version fields (lists from Hydra arrive as any sequence)."""
        versions = _as_tuple("sim.model_versions", self.model_versions)
        for i, value in enumerate(versions):
            if not isinstance(value, str) or not value:
                raise ConfigError.about(
                    f"sim.model_versions[{i}]", f"must be a non-empty string, got {echoed(value)}"
                )
        object.__setattr__(self, "model_versions", versions)
        times = _as_tuple("sim.upgrade_at_s", self.upgrade_at_s)
        times = tuple(
            float(checked_number(f"sim.upgrade_at_s[{i}]", t, error=ConfigError))
            for i, t in enumerate(times)
        )
        object.__setattr__(self, "upgrade_at_s", times)
        if not isinstance(self.upgrade_version, str) or not self.upgrade_version:
            raise ConfigError.about(
                "sim.upgrade_version",
                f"must be a non-empty string, got {echoed(self.upgrade_version)}",
            )
        downtime = checked_number(
            "sim.upgrade_downtime_s", self.upgrade_downtime_s, finite=True, error=ConfigError
        )
        object.__setattr__(self, "upgrade_downtime_s", float(downtime))
        upgrades = any(t < math.inf for t in times)
        why = "while no node upgrades (sim.upgrade_at_s)"
        _warn_idle(
            (
                ("upgrade_version", "v2", upgrades, why),
                ("upgrade_downtime_s", 0.0, upgrades, why),
            ),
            self,
        )

    def _check_cache_life(self) -> None:
        """The cache lifecycle's fields (pin budget, replica TTL, reclaim order)."""
        self._check_numbers((("pin_budget_fraction", 0, 1, False, True, False),), type_apart=True)
        ttl = checked_number("sim.replica_ttl_s", self.replica_ttl_s, above=True, error=ConfigError)
        object.__setattr__(self, "replica_ttl_s", ttl)  # inf: no TTL
        if self.reclaim_order not in RECLAIM_ORDERS:
            raise ConfigError.about(
                "sim.reclaim_order",
                f"must be one of {', '.join(RECLAIM_ORDERS)}, got {echoed(self.reclaim_order)}",
            )

    def _check_speculation(self) -> None:
        """The speculative-prefill settings (their own block, above)."""
        if isinstance(self.speculative_chunk_tokens, np.integer):
            object.__setattr__(self, "speculative_chunk_tokens", int(self.speculative_chunk_tokens))
        check_int("sim.speculative_chunk_tokens", self.speculative_chunk_tokens, 1, ConfigError)

    def _check_numbers(self, rules: tuple[NumberRule, ...], type_apart: bool = False) -> None:
        """Check each number field of ``rules`` (name, low, high, low open, high open,
        finite) with :func:`~envs.sim.checks.checked_number` and store it as a Python
        float (numpy scalars from sweeps included)."""
        for name, low, high, above, below, finite in rules:
            value = checked_number(
                f"sim.{name}",
                getattr(self, name),
                low,
                high,
                above=above,
                below=below,
                finite=finite,
                type_apart=type_apart,
                error=ConfigError,
            )
            object.__setattr__(self, name, value)


def _warn_idle(idle: tuple[tuple[str, Any, Any, str], ...], config: SimConfig) -> None:
    """A SettingWarning for each setting of ``idle`` (name, default, what it needs to do
    anything, why it does nothing) away from its default while what it needs is not set."""
    for name, default, needed, why in idle:
        value = getattr(config, name)
        if value != default and not needed:
            warnings.warn(
                SettingWarning(f"sim.{name}={value!r} does nothing {why}"),
                stacklevel=caller_stacklevel(),
            )


def _is_list(value: Any) -> bool:
    """A list or tuple (or a config library's list), not a string."""
    return isinstance(value, Sequence) and not isinstance(value, (str, bytes))


def _as_tuple(field_name: str, value: Any) -> tuple[Any, ...]:
    if not _is_list(value):
        raise ConfigError.about(field_name, f"must be a list, got {echoed(value)}")
    return tuple(value)


@dataclass(frozen=True)
class ClusterSpec:
    """The served model and the replicas (possibly of different kinds)."""

    model: ModelSpec
    nodes: tuple[NodeSpec, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        if _is_list(self.nodes):  # a list given is kept as a tuple: the spec stays frozen
            object.__setattr__(self, "nodes", tuple(self.nodes))
        if not self.nodes:
            raise ConfigError("cluster.nodes is empty: a cluster needs at least one node")
        if not isinstance(self.model, ModelSpec):
            raise TypeError(
                f"cluster.model must be a ModelSpec, got {echoed(self.model)} (ClusterSpec.uniform "
                "takes a model's name; model_preset(name) gives its ModelSpec)"
            )
        for i, node in enumerate(self.nodes):
            if not isinstance(node, NodeSpec):
                raise TypeError(
                    f"cluster.nodes[{i}] must be a NodeSpec, "
                    f"got {echoed(node)} (ClusterSpec.uniform "
                    "takes a node's name; parse_node(name) gives its NodeSpec)"
                )
        if len(self.nodes) > MAX_NODES:
            raise ConfigError(
                f"cluster.nodes has {len(self.nodes)} nodes; a cluster holds at most {MAX_NODES}"
            )

    @classmethod
    def uniform(cls, model: str | ModelSpec, node: str | NodeSpec, n_nodes: int) -> ClusterSpec:
        """``n_nodes`` identical replicas, e.g. ``uniform("llama-3.3-70b", "4xH100", 4)``."""
        checked_number("cluster.n_nodes", n_nodes, 1, MAX_NODES, integer=True, error=ConfigError)
        spec = node if isinstance(node, NodeSpec) else parse_node(node)
        model_spec = model if isinstance(model, ModelSpec) else model_preset(model)
        return cls(model_spec, tuple([spec] * n_nodes))

    @property
    def name(self) -> str:
        """The model and the nodes, each kind with its count, in the order the kinds
        first appear: ``llama-3.3-70b on 4 x 4xH100``, ``llama-3.3-70b on 2 x 4xH100
        + 1 x 8xH200`` (the label of a run on this cluster, ``evaluate_policies``'s rows)."""
        counts: dict[NodeSpec, int] = {}
        for node in self.nodes:
            counts[node] = counts.get(node, 0) + 1
        kinds = " + ".join(f"{n} x {node.name}" for node, n in counts.items())
        return f"{self.model.name} on {kinds}"

    def figures(self) -> dict[str, Any]:
        """The model's and every node's figures, JSON-ready (what ``results.json`` and
        a saved agent record of a cluster: :meth:`from_figures` makes it again):
        ``{"model": {ModelSpec's fields}, "nodes": [{"gpu": {GpuSpec's fields},
        "n_gpus": n}, ...]}``."""
        return {
            "model": dataclasses.asdict(self.model),
            "nodes": [
                {"gpu": dataclasses.asdict(node.gpu), "n_gpus": node.n_gpus} for node in self.nodes
            ],
        }

    @classmethod
    def from_figures(cls, figures: Any, where: str = "figures") -> ClusterSpec:
        """The cluster :meth:`figures` describes, every figure checked again: one that
        makes none (a saved agent's, edited by hand) is a ConfigError naming its
        place below ``where`` (``figures.model.layers``, ``figures.nodes[1].gpu.flops``,
        ``figures.nodes[0].n_gpus``)."""
        figures = _figures_part(where, figures, ("model", "nodes"))
        model = _made_of(f"{where}.model", figures["model"], ModelSpec)
        nodes = figures["nodes"]
        if not isinstance(nodes, list) or not nodes:
            raise ConfigError(
                f"{where}.nodes must be a non-empty list of nodes, got {echoed(nodes)}"
            )
        made = []
        for i, node in enumerate(nodes):
            place = f"{where}.nodes[{i}]"
            node = _figures_part(place, node, ("gpu", "n_gpus"))
            gpu = _made_of(f"{place}.gpu", node["gpu"], GpuSpec)
            with _naming_place(place):
                made.append(NodeSpec(gpu, node["n_gpus"]))
        return cls(model, tuple(made))


def _figures_part(where: str, value: Any, keys: Sequence[str]) -> Mapping[str, Any]:
    """``value`` at ``where`` in a cluster's figures, an object of exactly ``keys``."""
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where} must be an object of {', '.join(keys)}, got {echoed(value)}")
    odd = sorted(set(value) ^ set(keys))
    if odd:
        said = "unknown" if odd[0] in value else "missing"
        raise ConfigError(f"{where}: {said} key {echoed(odd[0])}; known: {', '.join(keys)}")
    return value


def _made_of(where: str, value: Any, kind: Any) -> Any:
    """The ModelSpec or GpuSpec the figures at ``where`` give (its fields, ``name``
    first), each checked by it."""
    names = [f.name for f in dataclasses.fields(kind)]
    required = [f.name for f in dataclasses.fields(kind) if f.default is dataclasses.MISSING]
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where} must be an object of {', '.join(names)}, got {echoed(value)}")
    unknown = sorted(set(value) - set(names))
    if unknown:
        raise ConfigError(f"{where}: unknown key {echoed(unknown[0])}; known: {', '.join(names)}")
    missing = [name for name in required if name not in value]
    if missing:
        raise ConfigError(f"{where}: missing key {echoed(missing[0])}; known: {', '.join(names)}")
    if not isinstance(value["name"], str):
        raise ConfigError(f"{where}.name must be a string, got {echoed(value['name'])}")
    with _naming_place(where):
        return kind(**value)


@contextlib.contextmanager
def _naming_place(where: str) -> Iterator[None]:
    """A ConfigError about a field of the object made names it at ``where``."""
    try:
        yield
    except ConfigError as error:
        if not error.fields:
            raise
        raise ConfigError(error.named({name: f"{where}.{name}" for name in error.fields})) from None


# The published setups of the BTB write-up's results table: four replicas each.
SETUPS: dict[str, tuple[str, str, int]] = {
    "70b_h100x4": ("llama-3.3-70b", "4xH100", 4),
    "qwen3_8b_h100x4": ("qwen3-8b", "4xH100", 4),
    "glm45_h100x4": ("glm-4.5", "4xH100", 4),
    "glm52_h100x8": ("glm-4.6", "8xH100", 4),
    "kimi_k2_h100x8": ("kimi-k2", "8xH100", 4),
    "dense1t_b300x4": ("dense-1t", "4xB300", 4),
}
DEFAULT_SETUP = "70b_h100x4"
"""The setup every command and env simulates unless told otherwise."""


def setup_cluster(name: str) -> ClusterSpec:
    """The cluster of a named published setup, e.g. ``"70b_h100x4"``."""
    if name not in SETUPS:
        raise ConfigError(f"unknown setup {echoed(name)}; known: {', '.join(SETUPS)}")
    model, node, n_nodes = SETUPS[name]
    return ClusterSpec.uniform(model, node, n_nodes)
