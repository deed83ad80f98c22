"""Tenants and model versions in cache keys, and rolling upgrades (envs.sim.tenancy).

Toy cluster (simkit): prefill 1 ms a token, 16-token blocks, so a 4-block
(64-token) prompt computed from scratch takes 64 ms; a hit on all of it reuses
63 tokens from HBM and computes the last one: 1 ms + 63 x HBM_S."""

from __future__ import annotations

import math

import numpy as np
import pytest
from simkit import (
    CORES,
    HBM_S,
    Prompts,
    Script,
    check_causal,
    check_run,
    decode_s,
    names,
    run_script,
    small_window,
    tight_h100_cluster,
    toy_cluster,
)

from baselines import make_policy
from envs.sim import WARM_OK, ConfigError, SimConfig, Simulator
from envs.sim.transfers import CANCELLED, FAILED

COLD_S = 64e-3
HIT_S = 1e-3 + 63 * HBM_S


def test_same_prompt_from_two_tenants_never_shares_kv() -> None:
    p = Prompts()
    p.add(0.0, names("P", 4), tenant="a")  # node 0 computes a's P: done at 64 ms
    p.add(1.0, names("P", 4), tenant="b")  # the same prompt from b, on node 0: no hit
    p.add(2.0, names("P", 4), tenant="a")  # a again on node 0: a hit
    p.add(3.0, names("P", 4), tenant="b")  # b on node 1, after warming a's P there
    p.add(4.0, names("P", 4), tenant="a")  # a on node 1: the copy serves it
    a_prefix = p.blocks(names("P", 4), "a")
    b_prefix = p.blocks(names("P", 4), "b")
    assert set(a_prefix).isdisjoint(b_prefix)

    def warm_b(sim: Simulator) -> list[str]:  # node 0 holds a's and b's P by now
        return [sim.warm(0, 1, a_prefix)]

    sim, script = run_script(toy_cluster(2), p, [0, 0, 0, 1, 1], {2: [warm_b]})
    rec = sim.records
    assert script.results[2] == [["ok"]]
    assert rec.ttft_s == pytest.approx([COLD_S, COLD_S, HIT_S, COLD_S, HIT_S], rel=1e-9)
    assert list(rec.hit_hbm_tokens) == [0, 0, 63, 0, 63]
    summary = rec.summary
    assert summary["ttft_by_tenant"]["a"]["requests"] == 3
    assert summary["ttft_by_tenant"]["a"]["ttft_mean_s"] == pytest.approx(
        (COLD_S + 2 * HIT_S) / 3, rel=1e-9
    )
    assert summary["ttft_by_tenant"]["b"]["ttft_mean_s"] == pytest.approx(COLD_S, rel=1e-9)
    assert check_causal(sim) == []


def test_a_workload_whose_tenants_share_block_ids_is_refused() -> None:
    """Cached KV is keyed by block ids: two tenants' prompts given the same ids by
    hand (not chained under their tenants) would hit each other's KV, so the
    workload is refused, naming both requests; one tenant may share freely."""
    from envs.sim.request import Request, Workload

    def request(i: int, tenant: str, blocks: tuple[int, ...]) -> Request:
        return Request(index=i, request_id=f"r{i}", arrival_s=float(i), input_tokens=4096,
                       output_tokens=1, blocks=blocks, tenant=tenant)  # fmt: skip

    shared = tuple(range(1, 17))
    with pytest.raises(ValueError, match=r"^workload 'w': requests 'r0' \(tenant 't1'\) and "
                       r"'r1' \(tenant 't2'\) share block id 1; cached KV is keyed by block "
                       r"ids, so each tenant's prompts need ids of their own"):  # fmt: skip
        Workload("w", 256, [request(0, "t1", shared), request(1, "t2", shared)])
    assert len(Workload("w", 256, [request(0, "t1", shared), request(1, "t1", shared)])) == 2
    other = tuple(range(101, 117))
    assert len(Workload("w", 256, [request(0, "t1", shared), request(1, "t2", other)])) == 2


def test_warm_of_another_tenants_prompt_finds_no_source() -> None:
    p = Prompts()
    p.add(0.0, names("P", 4), tenant="a")
    p.add(1.0, names("P", 4), tenant="b")
    b_prefix = p.blocks(names("P", 4), "b")
    sim, script = run_script(toy_cluster(2), p, [0, 1], {1: [lambda sim: sim.warm(0, 1, b_prefix)]})
    assert script.results[1] == ["source_lacks_prefix"]  # node 0 holds a's P only
    assert sim.records.ttft_s[1] == pytest.approx(COLD_S, rel=1e-9)
    assert sim.copies == []


def test_one_tenant_runs_report_no_per_tenant_block() -> None:
    p = Prompts()
    p.add(0.0, names("P", 4))
    sim, _ = run_script(toy_cluster(1), p, [0])
    assert "ttft_by_tenant" not in sim.records.summary
    assert "model_versions" not in sim.records.summary
    assert "version_mismatch" not in sim.warm_refused


def test_warm_between_versions_is_refused() -> None:
    p = Prompts()
    p.add(0.0, names("P", 4))  # node 0 (v1) computes P
    p.add(1.0, names("P", 4))  # node 1 serves v2: nothing to reuse, copy refused
    prefix = p.blocks(names("P", 4))
    config = SimConfig(model_versions=("v1", "v2"))
    sim, script = run_script(
        toy_cluster(2), p, [0, 1], {1: [lambda sim: sim.warm(0, 1, prefix)]}, config
    )
    assert script.results[1] == ["version_mismatch"]
    assert sim.warm_refused["version_mismatch"] == 1 and sim.warm_refused["upgrading"] == 0
    assert sim.records.ttft_s[1] == pytest.approx(COLD_S, rel=1e-9)
    assert sim.records.summary["model_versions"] == ["v1", "v2"]


def _upgrade_prompts() -> tuple[Prompts, tuple[int, ...]]:
    """Node 0 computes P (done at 64 ms), then at 0.45 s starts a 256-token
    prompt Q (first token at 0.706 s); its upgrade is due at 0.5 s."""
    p = Prompts()
    p.add(0.0, names("P", 4))
    p.add(0.45, names("Q", 16))
    p.add(0.6, names("P", 4))  # to node 0 while it drains: waits, then no hit
    p.add(1.0, names("P", 4))  # node 1 (still v1) computes P
    p.add(1.2, names("P", 4))  # node 1: a hit
    return p, p.blocks(names("P", 4))


@pytest.mark.parametrize("downtime_s", [0.0, 0.1])
def test_rolling_upgrade_drains_drops_kv_and_switches(downtime_s: float) -> None:
    p, prefix = _upgrade_prompts()
    config = SimConfig(upgrade_at_s=(0.5,), upgrade_downtime_s=downtime_s)
    actions = {
        2: [lambda sim: sim.warm(0, 1, prefix)],  # node 0 drains
        4: [lambda sim: sim.warm(1, 0, prefix)],  # node 0 serves v2 now, node 1 v1
    }
    sim, script = run_script(toy_cluster(2), p, [0, 0, 0, 1, 1], actions, config)
    rec = sim.records
    assert script.results[2] == ["upgrading"] and script.results[4] == ["version_mismatch"]
    switch_s = 0.45 + 0.256  # Q's prefill ends: node 0 has drained
    assert rec.admit_s[2] == pytest.approx(switch_s + downtime_s, rel=1e-12)
    expected = [COLD_S, 0.256, switch_s + downtime_s + COLD_S - 0.6, COLD_S, HIT_S]
    assert rec.ttft_s == pytest.approx(expected, rel=1e-9)
    assert rec.hit_hbm_tokens[2] == 0  # P's old-version KV went with the upgrade
    summary = rec.summary
    assert summary["model_versions"] == ["v2", "v1"]
    assert summary["upgrades_done"] == 1
    assert summary["upgrade_drain_s"] == pytest.approx([switch_s - 0.5], rel=1e-12)


def test_an_upgrade_to_the_same_version_is_a_restart() -> None:
    """``upgrade_version`` equal to the node's own: it drains, drops its KV and
    reloads as an upgrade does; copies to and from it are then not refused for
    their version."""
    p, prefix = _upgrade_prompts()
    config = SimConfig(upgrade_at_s=(0.5,), upgrade_version="v1")
    actions = {
        2: [lambda sim: sim.warm(0, 1, prefix)],  # node 0 drains
        4: [lambda sim: sim.warm(1, 0, prefix)],  # both serve v1 again: no version refusal
    }
    sim, script = run_script(toy_cluster(2), p, [0, 0, 0, 1, 1], actions, config)
    rec = sim.records
    # (node 0 computed P again for request 2, so the copy's own check refuses it)
    assert script.results[2] == ["upgrading"] and script.results[4] == ["target_has_prefix"]
    assert rec.hit_hbm_tokens[2] == 0  # the restart dropped P's KV
    assert rec.summary["model_versions"] == ["v1", "v1"]
    assert rec.summary["upgrades_done"] == 1


def test_upgrade_cancels_copies_that_have_not_started() -> None:
    p = Prompts()
    p.add(0.0, names("P", 4))  # node 0 computes P until 64 ms
    p.add(0.1, names("P", 4))  # node 1 upgraded at 50 ms: nothing to reuse
    prefix = p.blocks(names("P", 4))

    def route_then_warm(sim: Simulator) -> str:
        sim.route(0)
        return sim.warm(0, 1, prefix)  # waits for node 0's prefill

    config = SimConfig(upgrade_at_s=(float("inf"), 0.05))
    sim, script = run_script(toy_cluster(2), p, [0, 1], {0: [route_then_warm]}, config)
    assert script.results[0] == ["ok"]
    (copy,) = sim.copies
    assert copy.state == CANCELLED and copy.land_s < 0
    summary = sim.records.summary
    assert summary["copies_cancelled_by_upgrade"] == 1
    assert summary["warm_copies"] == 1 and summary["warm_copies_landed"] == 0
    assert sim.records.ttft_s[1] == pytest.approx(COLD_S, rel=1e-9)
    assert summary["model_versions"] == ["v1", "v2"]


@pytest.mark.parametrize("policy", ["btb", "btb_pending", "oracle_warm"])
def test_rolling_upgrade_serves_every_request_once(policy: str) -> None:
    """Copying policies on a bursty window while the four nodes upgrade one after
    another, under both copy models: every request served once, KV never over
    budget, nothing reused before it exists."""
    window = small_window()
    for copy_model in ("reference", "contention"):
        config = SimConfig(
            copy_model=copy_model, upgrade_at_s=(5.5, 6.3, 7.1, 9.0), upgrade_downtime_s=0.2
        )
        sim = Simulator(tight_h100_cluster(4), window, config, np.random.default_rng(3))
        make_policy(policy).run(sim)
        check_run(sim)
        summary = sim.records.summary
        assert summary["completed"] == len(window.requests)
        assert summary["upgrades_done"] == 4
        assert summary["model_versions"] == ["v2"] * 4
        assert check_causal(sim) == []


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"model_versions": ("v1",)}, "sim.model_versions"),
        ({"upgrade_at_s": (1.0, 2.0, 3.0)}, "sim.upgrade_at_s"),
    ],
)
def test_version_lists_must_fit_the_cluster(overrides: dict, field: str) -> None:
    p = Prompts()
    p.add(0.0, names("P", 1))
    with pytest.raises(ConfigError, match=field):
        Simulator(toy_cluster(2), p.workload(), SimConfig(**overrides))


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"model_versions": ("v1", "")}, r"sim.model_versions\[1\]"),
        ({"model_versions": "v1"}, "sim.model_versions"),
        ({"upgrade_at_s": (-1.0,)}, r"sim.upgrade_at_s\[0\]"),
        ({"upgrade_version": ""}, "sim.upgrade_version"),
        ({"upgrade_downtime_s": float("inf")}, "sim.upgrade_downtime_s"),
    ],
)
def test_bad_version_settings_name_the_field(overrides: dict, field: str) -> None:
    with pytest.raises(ConfigError, match=field):
        SimConfig(**overrides)


def test_a_copy_from_a_node_that_switched_models_before_it_landed_lands_nothing() -> None:
    """The copy of P from node 0 to node 1 (issued at 0.1 s) waits for node 1's
    240-token prefill (to 0.24 s). Node 0 switches to v2 at 0.12 s (its v1 KV
    dropped) and computes P again at 0.13 s, under v2. The copy would land v2 KV
    on node 1, which still serves v1: it lands nothing, and P + y on node 1 at
    0.9 s computes all 80 tokens (it used to hit 64)."""
    p = Prompts()
    p.add(0.0, names("P", 4))  # node 0: holds P from 64 ms
    p.add(0.0, names("L", 15))  # node 1: busy to 0.24 s
    p.add(0.1, ["x"])  # warms P onto node 1
    p.add(0.13, [*names("P", 4), "z"])  # node 0, now v2: computes P again
    p.add(0.9, [*names("P", 4), "y"])  # node 1, still v1
    prefix = p.blocks(names("P", 4))
    config = SimConfig(host_ram_bytes=0.0, upgrade_at_s=(0.12,))
    sim, script = run_script(
        toy_cluster(2), p, [0, 1, 0, 0, 1], {2: [lambda sim: sim.warm(0, 1, prefix)]}, config
    )
    assert script.results[2] == [WARM_OK]
    summary = sim.records.summary
    assert summary["model_versions"] == ["v2", "v1"]
    (copy,) = sim.copies
    assert copy.start_s == pytest.approx(0.24) and copy.state == FAILED
    assert sim.records.hit_hbm_tokens[4] == 0 and summary["warm_copies_lost"] == 1


def test_a_copy_waiting_on_a_cancelled_copy_is_lost_with_it() -> None:
    """Node 0 will compute P (queued behind a 240-token prefill); copies 0->1 and
    1->2 of P wait for their sources. Node 0's upgrade at 0.05 s drops what it
    would have computed, cancelling 0->1; 1->2, which waited for 0->1's blocks,
    is lost with it (it used to stay waiting and in flight to node 2 for the rest
    of the run, so a later copy to node 2 was refused as already in flight)."""
    p = Prompts()
    p.add(0.0, names("L", 15))  # node 0: busy to 0.24 s
    p.add(0.01, names("P", 4))  # node 0: queued, would compute P
    p.add(0.02, ["x"])  # warms P 0->1 and 1->2
    p.add(1.0, ["w"])  # warms P 1->2 again
    prefix = p.blocks(names("P", 4))
    actions = {
        2: [lambda sim: sim.warm(0, 1, prefix), lambda sim: sim.warm(1, 2, prefix)],
        3: [lambda sim: sim.warm(1, 2, prefix)],
    }
    config = SimConfig(host_ram_bytes=0.0, upgrade_at_s=(0.05,))
    sim, script = run_script(toy_cluster(3), p, [0, 0, 1, 1], actions, config)
    assert script.results[2] == [WARM_OK, WARM_OK]
    assert script.results[3] == ["source_lacks_prefix"]  # node 1 never got P
    assert [c.state for c in sim.copies] == [CANCELLED, FAILED]
    summary = sim.records.summary
    assert summary["copies_cancelled_by_upgrade"] == 1 and summary["warm_copies_lost"] == 1
    assert all(not n.inflight and not n.waiting_src for n in sim.nodes)


def test_a_node_lost_while_draining_for_its_upgrade_switches_at_the_loss() -> None:
    """Node 1 starts draining at 0.05 s (a 320-token prefill runs there) and is lost
    at 0.1 s: the request goes to node 0, where it starts over (first token at
    0.1 + 0.32 s), and node 1 has drained: it switches then, after 0.05 s of drain
    (it stayed draining on the old version while down, and switched when back)."""
    p = Prompts()
    p.add(0.0, names("a", 20))
    p.add(0.5, ["x"])
    config = SimConfig(
        upgrade_at_s=(math.inf, 0.05),
        fault_node_loss_s=(0.1,),
        fault_node_loss_nodes=(1,),
        fault_node_down_s=0.2,
    )
    sim, _ = run_script(toy_cluster(2), p, [1, 0], None, config)
    summary = sim.records.summary
    assert summary["upgrades_done"] == 1 and summary["model_versions"] == ["v1", "v2"]
    assert summary["upgrade_drain_s"] == [pytest.approx(0.05)]
    assert sim.records.first_token_s[0] == pytest.approx(0.42)
    assert not sim.nodes[1].draining and not sim.nodes[1].down


@pytest.mark.parametrize("core", CORES)
@pytest.mark.parametrize("downtime_s", [0.05, 0.5])
@pytest.mark.parametrize(("first_node", "drain_s"), [(0, 0.02), (1, 0.0)])
def test_a_node_lost_draining_serves_at_once_when_back_as_one_lost_loading(
    core: str, downtime_s: float, first_node: int, drain_s: float
) -> None:
    """Node 0 upgrades at 0.08 s, is lost at 0.1 s and is back at 0.3 s; a 64-token
    prompt comes to it at 0.31 s. With a request decoding there (first_node 0) it
    drains until the loss re-routes that request, and switches then (drain 0.02 s;
    it switched when back at 0.3 s and loaded its weights only then: admitted at
    0.35 s, TTFT 0.104 s, with a 0.05 s downtime). Idle (first_node 1) it switches
    at 0.08 s and the loss ends its load. Either way, whatever the downtime, it
    serves at once when back: admitted at 0.31 s, TTFT 64 ms."""
    p = Prompts()
    p.add(0.0, names("a", 4), output_tokens=101)
    p.add(0.31, names("c", 4))
    config = SimConfig(
        upgrade_at_s=(0.08,), upgrade_downtime_s=downtime_s,
        fault_node_loss_s=(0.1,), fault_node_loss_nodes=(0,), fault_node_down_s=0.2,
    )  # fmt: skip
    sim = Simulator(toy_cluster(2), p.workload(), config, core=core)
    sim.run(Script([first_node, 0]))
    check_run(sim)
    rec = sim.records
    assert rec.summary["upgrade_drain_s"] == [pytest.approx(drain_s, abs=1e-12)]
    assert rec.summary["model_versions"] == ["v2", "v1"]
    assert rec.admit_s[1] == pytest.approx(0.31) and rec.ttft_s[1] == pytest.approx(COLD_S)
    # request 0's record names the node that gave its first token (node 0 before the
    # loss when it went there first); a rerun on node 1 is in the totals' reruns
    assert rec.node[0] == first_node and rec.node[1] == 0
    reruns = sim.totals().reruns
    assert (reruns[0][1] == 1) if first_node == 0 else (0 not in reruns)
    assert not sim.nodes[0].inflight and not sim.nodes[0].waiting_src


@pytest.mark.parametrize("warm_first", [False, True])
def test_work_routed_to_a_node_loading_its_weights_starts_from_the_cache_then(
    warm_first: bool,
) -> None:
    """Node 0 upgrades to v2 at 0.1 s and loads its weights until 0.6 s. At 0.2 s a
    request of P and two blocks of its own goes to it, and P is warmed from node 1
    (v2, holding P since 64 ms), landing at 0.232 s. The request starts at 0.6 s,
    with P there whichever came first: it was admitted at its routing, from the
    cache without P, when routed before the warm (TTFT 0.496 s)."""
    p = Prompts()
    p.add(0.0, names("P", 4))  # node 1 computes P
    p.add(0.2, [*names("P", 4), "x", "y"])
    prefix = p.blocks(names("P", 4))

    def act(sim: Simulator) -> str:
        if warm_first:
            said = sim.warm(1, 0, prefix)
            sim.route(0)
            return said
        sim.route(0)
        return sim.warm(1, 0, prefix)

    config = SimConfig(
        model_versions=("v1", "v2"), upgrade_at_s=(0.1,), upgrade_downtime_s=0.5,
        copy_model="contention",
    )  # fmt: skip
    sim, script = run_script(toy_cluster(2), p, [1, None], {1: [act]}, config)
    rec = sim.records
    assert script.results[1] == [WARM_OK] and sim.copies[0].land_s == pytest.approx(0.232)
    assert rec.admit_s[1] == pytest.approx(0.6) and rec.hit_hbm_tokens[1] == 64
    assert rec.ttft_s[1] == pytest.approx(0.4 + 32e-3 + 64 * HBM_S, rel=1e-12)
    check_run(sim)
    assert check_causal(sim) == []


def test_a_speculation_sent_to_a_node_loading_its_weights_waits_for_them() -> None:
    """Node 0 loads v2 until 0.6 s. At 0.2 s a speculation of P (4 blocks) is sent
    to it, and P+x arrives for it at 0.3 s: the request goes first at 0.6 s (a
    speculation runs only on an idle node with nothing queued); it ran from 0.6 s
    ahead of the request, which then waited to 0.664 s."""
    p = Prompts()
    p.add(0.0, names("P", 4))  # node 1 computes P
    p.add(0.2, ["y"])  # node 1; its decision speculates P on node 0
    p.add(0.3, [*names("P", 4), "x"])  # node 0
    prefix = p.blocks(names("P", 4))
    config = SimConfig(model_versions=("v1", "v2"), upgrade_at_s=(0.1,), upgrade_downtime_s=0.5)
    sim, script = run_script(
        toy_cluster(2), p, [1, 1, 0], {1: [lambda s: s.speculate(0, prefix)]}, config
    )
    assert script.results[1] == ["ok"]
    assert sim.records.admit_s[2] == pytest.approx(0.6)
    check_run(sim)


def test_a_node_lost_while_loading_its_weights_serves_at_once_when_back() -> None:
    """Lost at 0.3 s during its 0.1-0.6 s load and back at 0.4 s, node 0 serves at
    once, as every node back from a loss does: its load is over."""
    p = Prompts()
    p.add(0.0, names("P", 1))
    p.add(0.45, names("Q", 1))
    config = SimConfig(
        model_versions=("v1", "v2"), upgrade_at_s=(0.1,), upgrade_downtime_s=0.5,
        fault_node_loss_s=(0.3,), fault_node_loss_nodes=(0,), fault_node_down_s=0.1,
    )  # fmt: skip
    sim, _ = run_script(toy_cluster(2), p, [1, 0], {}, config)
    assert sim.records.admit_s[1] == pytest.approx(0.45)
    assert not sim.versions.loading(sim.nodes[0], 0.45)
    check_run(sim)


@pytest.mark.parametrize("core", CORES)
@pytest.mark.parametrize("down_s", [0.1, 0.05])
def test_an_upgrade_due_while_a_node_is_down_serves_at_once_when_back(
    core: str, down_s: float
) -> None:
    """Node 0 is down from 0.05 to 0.15 s; its upgrade at 0.1 s finds it drained
    (no drain): it switches then, and its 0.5 s load ends at its return at the
    latest, as for a node lost while loading: a request routed to it at 0.2 s is
    admitted at once, TTFT 64 ms (it loaded from 0.1 to 0.6 s, through its return,
    and that request started at 0.6 s). Back at 0.1 s, the upgrade's own instant,
    it counts as down when the upgrade comes (docs/tenancy.md): the same."""
    p = Prompts()
    p.add(0.0, names("a", 4))
    p.add(0.2, names("c", 4))
    config = SimConfig(
        upgrade_at_s=(0.1,), upgrade_downtime_s=0.5,
        fault_node_loss_s=(0.05,), fault_node_loss_nodes=(0,), fault_node_down_s=down_s,
    )  # fmt: skip
    sim = _upgraded_undrained(p, config, core)
    rec = sim.records
    assert rec.admit_s[1] == pytest.approx(0.2) and rec.ttft_s[1] == pytest.approx(COLD_S)
    assert not sim.versions.loading(sim.nodes[0], 0.2)


def _upgraded_undrained(p: Prompts, config: SimConfig, core: str) -> Simulator:
    """``p`` served with ``config`` (request 0 on node 1, request 1 on node 0, which
    upgrades with nothing to drain), checked: node 0 serves v2, node 1 v1."""
    sim = Simulator(toy_cluster(2), p.workload(), config, core=core)
    sim.run(Script([1, 0]))
    check_run(sim)
    assert sim.records.summary["upgrade_drain_s"] == [0.0]
    assert sim.records.summary["model_versions"] == ["v2", "v1"]
    return sim


@pytest.mark.parametrize("core", CORES)
@pytest.mark.parametrize("loss_s", [0.0799, 0.0801])
def test_a_node_lost_just_before_or_after_its_upgrade_serves_at_once_when_back(
    core: str, loss_s: float
) -> None:
    """Node 0 upgrades at 0.08 s (0.5 s downtime) and is lost, idle, just after
    (0.0801 s: it switched at 0.08 s and the loss ends its load) or just before
    (0.0799 s: the upgrade comes while it is down, and it switches then), for
    0.2 s. A 64-token prompt routed to it at 0.31 s, after its return, is admitted
    at once, TTFT 64 ms, either way. (Lost just before, it loaded from 0.08 s
    through its return: admitted at 0.58 s, TTFT 0.334 s.)"""
    p = Prompts()
    p.add(0.0, names("a", 4), output_tokens=101)
    p.add(0.31, names("c", 4))
    config = SimConfig(
        upgrade_at_s=(0.08,), upgrade_downtime_s=0.5,
        fault_node_loss_s=(loss_s,), fault_node_loss_nodes=(0,), fault_node_down_s=0.2,
    )  # fmt: skip
    rec = _upgraded_undrained(p, config, core).records
    assert rec.summary["fault_node_losses"] == 1 and rec.summary["fault_node_recoveries"] == 1
    assert rec.node[1] == 0
    assert rec.admit_s[1] == pytest.approx(0.31) and rec.ttft_s[1] == pytest.approx(COLD_S)


@pytest.mark.parametrize("core", CORES)
def test_a_warm_onto_a_node_whose_switch_decode_overshoot_ran_ahead_is_refused(
    core: str,
) -> None:
    """A case the feature fuzz found (2026-12-06). Node 1 restarts (upgrade to v1) at
    30 ms while request 1 decodes there (16 ms prefill, then 39 steps: done at
    t1 = 16 ms + decode_s(39, 1, 16) = 55.0014 ms). Request 2 arrives 0.5 ms before
    t1; decode overshoot (SimConfig.decode_overshoot) runs node 1's step to t1 before
    the router decides, so node 1 switches at t1 (drops its KV, loads for 0.1 s) while
    the router's now is t1 - 0.5 ms. A warm of request 0's two blocks from node 0 then
    (16 us of bytes under contention at 2.048 GB/s) landed at t1 - 0.484 ms, before the
    switch that should have dropped it, and request 2, admitted on node 1 once its
    weights were in (t1 + 0.1 s), hit both blocks: TTFT 0.1005 s + 16 ms + 32 x HBM_S
    = 0.11650 s. The node is still draining at the router's now: the warm is refused
    "upgrading", and request 2 computes its 48 tokens, TTFT 0.1005 + 0.048 = 0.1485 s."""
    p = Prompts()
    p.add(0.0, names("p", 2))  # request 0: the prefix, on node 0
    p.add(0.0, names("q", 1), output_tokens=40)  # request 1: decodes on node 1 past 30 ms
    t1 = 0.016 + decode_s(39, 1, 16)
    p.add(t1 - 0.0005, [*names("p", 2), "x"])  # request 2: arrives in request 1's last step
    config = SimConfig(
        copy_model="contention", decode_overshoot=True, upgrade_at_s=(math.inf, 0.03),
        upgrade_downtime_s=0.1, upgrade_version="v1",
    )  # fmt: skip
    prefix = p.blocks(names("p", 2))
    script = Script([0, 1, 1], {2: [lambda sim: sim.warm(0, 1, prefix)]})
    sim = Simulator(toy_cluster(2, rdma_bw=2.048e9), p.workload(), config, core=core)
    sim.run(script)
    check_run(sim)
    rec = sim.records
    assert sim.versions.switched_s == {1: pytest.approx(t1, rel=1e-12)}
    assert script.results[2] == ["upgrading"] and sim.copies == []
    assert rec.admit_s[2] == pytest.approx(t1 + 0.1, rel=1e-12)
    assert rec.hit_hbm_tokens[2] == 0
    assert rec.ttft_s[2] == pytest.approx(0.1005 + 0.048, rel=1e-9)


@pytest.mark.parametrize("core", CORES)
@pytest.mark.parametrize("overshoot", [True, False])
def test_decode_overshoot_stops_at_an_upgrade_due_within_the_step(
    core: str, overshoot: bool
) -> None:
    """A case the feature fuzz found (2026-12-06). Request 0 decodes alone on the one
    node, to t1 = 16 ms + decode_s(39, 1, 16) = 55.0014 ms; the node upgrades at
    t1 - 0.2 ms (0.1 s of weights), and request 1 arrives at t1 - 0.5 ms, in request
    0's last step. Decode overshoot ran that step to t1 before the router decided, past
    the upgrade time: request 1 was admitted at t1 under the old version (TTFT 16.5 ms;
    a drain of 16.2 ms). The drain comes first now, as without overshoot: the node
    switches at its upgrade time (drain 0.2 ms, the step's rest) and request 1 waits
    for the weights, admitted at t1 + 0.1 s, TTFT 0.1005 + 0.016 = 0.1165 s."""
    p = Prompts()
    p.add(0.0, names("q", 1), output_tokens=40)
    t1 = 0.016 + decode_s(39, 1, 16)
    p.add(t1 - 0.0005, names("r", 1))
    config = SimConfig(
        decode_overshoot=overshoot, upgrade_at_s=(t1 - 0.0002,), upgrade_downtime_s=0.1
    )
    sim = Simulator(toy_cluster(1), p.workload(), config, core=core)
    sim.run(Script([0, 0]))
    check_run(sim)
    rec = sim.records
    assert rec.summary["upgrade_drain_s"] == [pytest.approx(0.0002, rel=1e-9)]
    assert rec.admit_s[1] == pytest.approx(t1 + 0.1, rel=1e-12)
    assert rec.ttft_s[1] == pytest.approx(0.1005 + 0.016, rel=1e-9)
    assert rec.summary["model_versions"] == ["v2"]
