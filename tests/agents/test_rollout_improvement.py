"""Rollout policy improvement: the probe serves exactly as the agent does, a fork
changes one route only, labels are the measured best, and ``train`` runs rounds,
scores each on validation windows and keeps the best."""

from __future__ import annotations

import copy
import dataclasses
import json
import warnings
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

import envs  # noqa: F401  (registers the environments)
from agents.adapter import AgentPolicy
from agents.algorithms import AgentSpec, build_model
from agents.imitation import Demonstrations
from agents.improvement_settings import ImprovementSettings
from agents.rollout_improvement import (
    _Probe,
    _serve,
    improve_round,
    measure_window,
)
from envs.encoder import NODE_FEATURES, hold_s, log_seconds, max_backlog_s
from envs.route_warm import allowed_warms
from envs.sim import SimConfig, Simulator, setup_cluster
from envs.sim.errors import SettingWarning
from envs.sim.request import Workload
from envs.workloads.bursted import BurstedSyntheticConfig, synthetic_window
from envs.workloads.registry import windows
from experiments.train import train
from tests.experiments.test_hydra_commands import TINY, compose_train

SMALL = BurstedSyntheticConfig(n_bursts=2, burst_requests=30, n_decoys=4, burst_window_s=4.0)
CLUSTER = setup_cluster("70b_h100x4")
SIM = SimConfig(causal_kv=True)


@pytest.fixture(scope="module")
def agent() -> AgentPolicy:
    """A fresh MaskablePPO node-set agent whose action heads are spread, so that
    its greedy routes differ across nodes."""
    spec = AgentSpec(algo="maskable_ppo", env="route_warm", hidden=16)
    window = synthetic_window(SMALL, window=0)
    model = build_model(spec, gym.make(spec.env_id, windows=[window]), {"n_steps": 8})
    torch.manual_seed(0)
    with torch.no_grad():
        for name, param in model.policy.action_net.named_parameters():
            param.normal_(0.0, 1.0) if name.endswith("weight") else param.zero_()
    return AgentPolicy(model, spec)


def test_the_probe_serves_as_the_agent_and_a_fork_moves_one_route(agent: AgentPolicy) -> None:
    window = synthetic_window(SMALL, window=1)
    plain = agent.run(Simulator(CLUSTER, window, SIM, np.random.default_rng(3)))
    probe = _Probe(agent, record=range(len(window.requests)), long_s=0.25)
    assert np.array_equal(_serve(probe, CLUSTER, window, SIM, 3), plain.ttft_s)
    own = int(probe.seen[10][2][0])
    assert own == int(plain.node[10])
    # the long decisions are exactly those where the agent's node is held >= 0.25 s
    holds = {i: hold_s(obs, int(action[0])) for i, (obs, _, action) in probe.seen.items()}
    assert probe.long == [i for i in sorted(holds) if holds[i] >= 0.25]
    assert 0 < len(probe.long) < len(holds)
    same = _Probe(agent, fork=10, node=own)
    assert np.array_equal(_serve(same, CLUSTER, window, SIM, 3), plain.ttft_s)
    other = (own + 1) % 4
    moved = _Probe(agent, fork=10, node=other)
    simulator = Simulator(CLUSTER, window, SIM, np.random.default_rng(3))
    records = moved.run(simulator)
    assert int(records.node[10]) == other
    assert np.array_equal(records.ttft_s[:10], plain.ttft_s[:10])  # the past is the same


def test_labels_are_the_measured_best_node(agent: AgentPolicy) -> None:
    """Every measured decision: the label is the node with the lowest summed TTFT
    when it saves at least min_gain_s, else the agent's own; re-serving the cut
    window with the label's route gives the recorded sum."""
    window = synthetic_window(SMALL, window=2)
    settings = ImprovementSettings(
        states_per_window=4, lead_requests=20, horizon_requests=40, min_gain_s=0.01, repeat=2
    )
    anchors = min(settings.anchor_per_window, len(window.requests))
    demos, stats = measure_window(agent, window, CLUSTER, SIM, settings, 5)
    assert stats.measured == len(stats.decisions) == 4
    assert len(demos) == anchors + settings.repeat * stats.measured
    changed = 0
    for decision in stats.decisions:
        sums = np.array(decision["sums_s"])
        chosen, label = decision["chosen"], decision["label"]
        if label != chosen:
            changed += 1
            assert sums[label] == sums.min() and sums[chosen] - sums[label] >= 0.01
        else:
            assert sums[chosen] - sums.min() < 0.01
        index = decision["index"]
        start = max(0, index - settings.lead_requests)
        cut = Workload(
            window.name,
            window.block_tokens,
            window.requests[start : index + settings.horizon_requests],
        )
        probe = _Probe(agent, fork=index - start, node=label)
        assert _serve(probe, CLUSTER, cut, SIM, 5)[index - start :].sum() == sums[label]
    assert changed == stats.changed
    # every measured label's route is one the action mask allows
    for mask, action in zip(demos.masks[anchors:], demos.actions[anchors:]):
        assert mask[action[0]]


def test_an_anchored_window_gives_the_agents_own_decisions_only(agent: AgentPolicy) -> None:
    """measure=False (a window of improvement.anchor_families): the anchors, each the
    agent's own action, and nothing measured; the same anchors as a measured window."""
    window = synthetic_window(SMALL, window=2)
    settings = ImprovementSettings(states_per_window=4, lead_requests=20, horizon_requests=40)
    anchors = min(settings.anchor_per_window, len(window.requests))
    measured, measured_stats = measure_window(agent, window, CLUSTER, SIM, settings, 5)
    demos, stats = measure_window(agent, window, CLUSTER, SIM, settings, 5, measure=False)
    assert stats.measured == stats.changed == 0 and not stats.decisions
    assert len(demos) == anchors and stats.long_decisions > 0
    assert all(np.array_equal(a, b) for a, b in zip(demos.actions, measured.actions[:anchors]))
    assert stats.before_s == measured_stats.before_s and measured_stats.measured == 4


class _SometimesWarming(AgentPolicy):
    """The fixture agent, warming every allowed node at about a third of the
    arrivals where the mask allows one (chosen by the observation, so the same
    arrivals in every serve); the fixture agent itself never warms on SMALL."""

    def act(self, obs: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
        action = np.array(super().act(obs, mask), dtype=np.int64)
        if mask is not None and int(abs(float(obs.sum())) * 1e3) % 3 == 0:
            action[1:5] = allowed_warms(mask, 4)
        return action


def test_warm_anchors_add_each_own_warm_decision_repeated(agent: AgentPolicy) -> None:
    """warm_anchor_repeat=3: after the random anchors come, 3 times over and in
    arrival order, the agent's own (observation, mask, action) at every arrival
    where it warms a node, then the measured labels; on an anchored window too.
    Where the warm variant wins the window, its anchors are the variant's and no
    own warm decision is added."""
    agent = _SometimesWarming(agent.model, agent.spec)
    window = synthetic_window(SMALL, window=2)
    settings = ImprovementSettings(states_per_window=4, lead_requests=20, horizon_requests=40)
    held = dataclasses.replace(settings, warm_anchor_repeat=3)
    anchors = min(settings.anchor_per_window, len(window.requests))
    every = _Probe(agent, record=range(len(window.requests)))
    _serve(every, CLUSTER, window, SIM, 5)
    warms = [seen for seen in every.seen.values() if seen[2][1:5].any()]
    assert 0 < len(warms) < len(window.requests)
    plain, _ = measure_window(agent, window, CLUSTER, SIM, settings, 5)
    for measure in (True, False):
        demos, stats = measure_window(agent, window, CLUSTER, SIM, held, 5, measure=measure)
        labels = settings.repeat * stats.measured
        assert stats.measured == (4 if measure else 0)
        assert len(demos) == anchors + 3 * len(warms) + labels
        added = zip(demos.obs[anchors : -labels or None], demos.actions[anchors : -labels or None])
        for (obs, action), (own_obs, _, own_action) in zip(added, warms * 3, strict=True):
            assert np.array_equal(obs, own_obs) and np.array_equal(action, own_action)
        same = [*demos.actions[:anchors], *(demos.actions[-labels:] if labels else [])]
        kept = plain.actions if measure else plain.actions[:anchors]
        assert all(np.array_equal(a, b) for a, b in zip(same, kept, strict=True))
    full = next(windows("rising_load", split="train"))
    rising = Workload(full.name, full.block_tokens, full.requests[:150])
    for gain, won in ((0.0, 1), (0.5, 0)):  # the variant saves 0.8 %: wins at 0, not at 50 %
        variant = dataclasses.replace(held, warm_variant=True, warm_variant_gain=gain)
        demos, stats = measure_window(agent, rising, CLUSTER, SIM, variant, 5)
        own = _Probe(agent, record=range(150))
        _serve(own, CLUSTER, rising, SIM, 5)
        added = 3 * sum(bool(seen[2][1:5].any()) for seen in own.seen.values())
        assert stats.warm_windows == won and added > 0
        assert len(demos) == 150 + (0 if won else added) + settings.repeat * stats.measured


def test_allowed_warms_are_the_yes_of_each_nodes_pair() -> None:
    # 3 nodes: routes, then (no, yes) per node, then evict (none, 0, 1, 2)
    mask = np.array([1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 0, 0], dtype=bool)
    assert allowed_warms(mask, 3).tolist() == [0, 1, 1]


def test_the_warm_variant_labels_a_window_where_warming_everywhere_wins(
    agent: AgentPolicy,
) -> None:
    """On the first 150 requests of a rising_load train window the fixture agent
    is slower than the same agent warming onto every allowed node (32.0 against
    29.6 s summed): with warm_variant the window's anchors come from that
    trajectory and every label warms every allowed node; asked for a larger saving
    than that, the labels are those of warm_variant off."""
    full = next(windows("rising_load", split="train"))
    window = Workload(full.name, full.block_tokens, full.requests[:150])
    settings = ImprovementSettings(
        states_per_window=2, lead_requests=20, horizon_requests=40, min_gain_s=0.01
    )
    on = dataclasses.replace(settings, warm_variant=True, warm_variant_gain=0.05)
    demos, stats = measure_window(agent, window, CLUSTER, SIM, on, 5)
    assert stats.warm_windows == 1 and stats.measured == 2
    assert stats.warm_variant_s[0] <= 0.95 * stats.before_s[0]
    anchors = min(on.anchor_per_window, len(window.requests))
    variant = _Probe(agent, record=range(len(window.requests)), warm_all=True)
    assert _serve(variant, CLUSTER, window, SIM, 5).sum() == stats.warm_variant_s[0]
    # the anchors are the variant's own (observation, action) pairs, not relabelled ones
    seen = {obs.tobytes(): action for obs, _, action in variant.seen.values()}
    for obs, action in zip(demos.obs[:anchors], demos.actions[:anchors]):
        assert np.array_equal(seen[obs.tobytes()], action)
    for mask, action in zip(demos.masks, demos.actions):
        assert np.array_equal(action[1:5], allowed_warms(mask, 4))
    assert sum(int(action[1:5].sum()) for action in demos.actions) > 0
    off, off_stats = measure_window(agent, window, CLUSTER, SIM, settings, 5)
    assert off_stats.warm_windows == 0 and not off_stats.warm_variant_s
    strict = dataclasses.replace(on, warm_variant_gain=0.5)
    kept, kept_stats = measure_window(agent, window, CLUSTER, SIM, strict, 5)
    assert kept_stats.warm_windows == 0 and kept_stats.warm_variant_s == stats.warm_variant_s
    assert len(kept) == len(off)
    assert all(np.array_equal(a, b) for a, b in zip(kept.actions, off.actions))
    assert any(not np.array_equal(a, b) for a, b in zip(demos.actions, off.actions))
    # a window the variant is not tried on (improvement.warm_variant_families): the
    # labels of warm_variant off, and no variant served
    skipped, skipped_stats = measure_window(agent, window, CLUSTER, SIM, on, 5, variant=False)
    assert skipped_stats.warm_windows == 0 and not skipped_stats.warm_variant_s
    assert len(skipped) == len(off)
    assert all(np.array_equal(a, b) for a, b in zip(skipped.actions, off.actions))


def test_a_round_tries_the_warm_variant_on_the_named_windows_only(agent: AgentPolicy) -> None:
    """variant_windows names the windows the warm variant is served on (None: all),
    in one process and in forked workers alike: each named window's variant sum is
    the one it has when every window is tried."""
    pair = [synthetic_window(SMALL, window=i) for i in (3, 4)]
    settings = ImprovementSettings(
        states_per_window=1, lead_requests=10, horizon_requests=20, epochs=1, warm_variant=True
    )
    served = {}
    for label, named in (("all", None), ("second", {pair[1].name}), ("first", {pair[0].name})):
        for workers in (1, 2):  # the forked workers are told too
            model = copy.deepcopy(agent.model)
            stats = improve_round(
                model,
                agent.spec,
                pair,
                CLUSTER,
                SIM,
                dataclasses.replace(settings, workers=workers),
                seed=9,
                variant_windows=named,
            )
            served[(label, workers)] = stats.warm_variant_s
    for workers in (1, 2):
        first, second = served[("all", workers)]
        assert first != second
        assert served[("second", workers)] == [second]
        assert served[("first", workers)] == [first]
    model = copy.deepcopy(agent.model)
    none = improve_round(
        model, agent.spec, pair, CLUSTER, SIM, settings, seed=9, variant_windows=set()
    )
    assert none.warm_variant_s == [] and none.warm_windows == 0


def test_agreeing_start_fits_the_same_labels_with_the_kl_term_round_after_round(
    agent: AgentPolicy,
) -> None:
    """improvement.agreeing=start changes the fit only: the same labels as with
    ``label``, the share the policy already chose recorded, and a second round on
    the fitted model (a policy that has served forward passes) runs too."""
    pair = [synthetic_window(SMALL, window=i) for i in (3, 4)]
    settings = ImprovementSettings(
        states_per_window=1, lead_requests=10, horizon_requests=20, epochs=1, anchor_per_window=50
    )
    runs = {}
    for agreeing in ("label", "start"):
        model, labels = copy.deepcopy(agent.model), Demonstrations()
        mode = dataclasses.replace(settings, agreeing=agreeing)
        rounds = [
            improve_round(model, agent.spec, pair, CLUSTER, SIM, mode, seed=9 + r, demos=labels)
            for r in range(2)
        ]
        runs[agreeing] = rounds, labels
    (plain, plain_labels), (kept, kept_labels) = runs["label"], runs["start"]
    assert plain[0].labels == kept[0].labels > 0 and plain[0].measured == kept[0].measured
    first = slice(0, plain[0].labels)
    assert all(
        np.array_equal(a, b)
        for a, b in zip(plain_labels.actions[first], kept_labels.actions[first])
    )
    assert "bc_agreeing" not in plain[0].fit
    assert all(0.0 < r.fit["bc_agreeing"] <= 1.0 for r in kept)
    assert kept[0].fit["bc_agreeing"] > 0.9  # 100 anchors of its own, 0-2 measured


def test_max_backlog_reads_the_busiest_nodes_backlog() -> None:
    obs = np.zeros(4 * len(NODE_FEATURES) + 6, dtype=np.float32)
    backlog = NODE_FEATURES.index("backlog")
    obs[2 * len(NODE_FEATURES) + backlog] = log_seconds(0.5)
    obs[backlog] = log_seconds(0.2)
    obs[3 * len(NODE_FEATURES) + NODE_FEATURES.index("wait")] = 1.0  # not a backlog
    assert max_backlog_s(obs, 4) == pytest.approx(0.5, rel=1e-4)
    assert max_backlog_s(np.zeros_like(obs), 4) == 0.0


def test_the_calm_warm_variant_warms_everywhere_only_while_no_node_is_busy(
    agent: AgentPolicy,
) -> None:
    """calm_s: at each arrival the probe warms every allowed node when no node has
    calm_s seconds of work ahead, else it takes the agent's own warm bits."""
    full = next(windows("rising_load", split="train"))
    window = Workload(full.name, full.block_tokens, full.requests[:150])
    probe = _Probe(agent, record=range(150), warm_all=True, calm_s=0.05)
    _serve(probe, CLUSTER, window, SIM, 5)
    calm = busy = 0
    for obs, mask, action in probe.seen.values():
        if max_backlog_s(obs, 4) < 0.05:
            calm += 1
            assert np.array_equal(action[1:5], allowed_warms(mask, 4))
        else:
            busy += 1
            assert np.array_equal(action, np.asarray(agent.act(obs, mask)))
    assert calm > 0 and busy > 0


def test_bad_settings_are_named() -> None:
    with pytest.raises(ValueError, match=r"improvement\.windows must be a whole number >= 1"):
        ImprovementSettings(windows=0)
    with pytest.raises(ValueError, match=r"improvement\.min_gain_s must be a finite number"):
        ImprovementSettings(min_gain_s=float("nan"))
    with pytest.raises(ValueError, match=r"improvement\.aggregate must be true or false"):
        ImprovementSettings(aggregate="yes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"improvement\.families must be a non-empty list"):
        ImprovementSettings(families=[])
    with pytest.raises(ValueError, match=r"improvement\.families must be a non-empty list"):
        ImprovementSettings(families="synthetic")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"improvement\.anchor_families must be a non-empty"):
        ImprovementSettings(anchor_families=[""])
    with pytest.raises(
        ValueError, match=r"improvement\.anchor_families: 'mixed' is also in improvement\.families"
    ):
        ImprovementSettings(families=["synthetic", "mixed"], anchor_families=["mixed"])
    with pytest.raises(ValueError, match=r"improvement\.warm_anchor_repeat must be a whole"):
        ImprovementSettings(warm_anchor_repeat=-1)
    with pytest.raises(ValueError, match=r"improvement\.warm_variant must be true or false"):
        ImprovementSettings(warm_variant=1)  # type: ignore[arg-type]
    for calm in (0, True, float("inf"), "x"):
        with pytest.raises(ValueError, match=r"improvement\.warm_calm_s must be a finite number"):
            ImprovementSettings(warm_calm_s=calm)  # type: ignore[arg-type]
    for agreeing in ("soft", "", None):
        with pytest.raises(
            ValueError, match=r"improvement\.agreeing must be one of label, start, got"
        ):
            ImprovementSettings(agreeing=agreeing)  # type: ignore[arg-type]
    for seeds in ([], [1, 1], [-1], 3, [True], ["1"]):
        with pytest.raises(ValueError, match=r"improvement\.pool_seeds must be a non-empty list"):
            ImprovementSettings(pool_seeds=seeds)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"improvement\.warm_variant_families must be a non-"):
        ImprovementSettings(warm_variant=True, warm_variant_families=[])
    with pytest.raises(
        ValueError,
        match=r"improvement\.warm_variant_families: 'mixed' is in neither improvement\.families",
    ):
        ImprovementSettings(
            warm_variant=True,
            families=["rising"],
            anchor_families=["synthetic1s"],
            warm_variant_families=["rising", "mixed"],
        )
    ImprovementSettings(  # a family the rounds anchor can be tried
        warm_variant=True,
        families=["rising"],
        anchor_families=["mixed"],
        warm_variant_families=["mixed"],
    )
    with pytest.warns(SettingWarning, match=r"warm_variant_families=\['mixed'\] has no effect"):
        ImprovementSettings(families=["rising"], warm_variant_families=["mixed"])  # no variant
    for gain in (1.0, -0.1, True):
        with pytest.raises(ValueError, match=r"improvement\.warm_variant_gain must be a share"):
            ImprovementSettings(warm_variant_gain=gain)


def test_warm_options_without_the_warm_variant_warn_that_they_do_nothing() -> None:
    with pytest.warns(SettingWarning, match=r"improvement\.warm_calm_s=0\.3 has no effect"):
        ImprovementSettings(warm_calm_s=0.3)
    with pytest.warns(SettingWarning, match=r"improvement\.warm_variant_gain=0 has no effect"):
        ImprovementSettings(warm_variant_gain=0)
    with pytest.warns(SettingWarning, match=r"improvement\.warm_variant_families=\['rising'\]"):
        ImprovementSettings(warm_variant_families=["rising"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ImprovementSettings()  # the defaults, quietly
        ImprovementSettings(warm_variant=True, warm_calm_s=0.3, warm_variant_gain=0)


def test_a_setting_s_warning_is_one_line_in_the_commands(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from experiments._cli import main_guard

    assert main_guard(lambda: ImprovementSettings(warm_calm_s=0.3)) == 0
    err = capsys.readouterr().err
    assert err == (
        "warning: improvement.warm_calm_s=0.3 has no effect: improvement.warm_variant is false\n"
    )


def test_the_measured_pool_keeps_the_named_families_in_pool_order() -> None:
    from types import SimpleNamespace

    from experiments.train import measured_pool, round_pool, variant_pool

    names = ["w/synthetic-0001", "w/synthetic1s-0002", "w/mixed-0003", "w/synthetic-0004"]
    pool = [SimpleNamespace(name=name) for name in names]
    assert measured_pool(pool, None) is pool
    kept = measured_pool(pool, ["synthetic", "mixed"])
    assert [w.name for w in kept] == ["w/synthetic-0001", "w/mixed-0003", "w/synthetic-0004"]
    rounds, anchored = round_pool(pool, ["mixed"], ["synthetic1s"])
    assert [w.name for w in rounds] == ["w/synthetic1s-0002", "w/mixed-0003"]
    assert anchored == {"w/synthetic1s-0002"}
    rounds, anchored = round_pool(pool, None, ["synthetic1s"])
    assert rounds is pool and anchored == {"w/synthetic1s-0002"}
    assert round_pool(pool, ["mixed"], None) == (measured_pool(pool, ["mixed"]), set())
    assert variant_pool(pool, None) is None
    assert variant_pool(pool, ["synthetic"]) == {"w/synthetic-0001", "w/synthetic-0004"}
    with pytest.raises(ValueError, match=r"improvement\.anchor_families: no train window of"):
        round_pool(pool, None, ["rising"])
    with pytest.raises(
        ValueError,
        match=r"improvement\.families: no train window of family 'rising' "
        r"\(the train windows' families: mixed, synthetic, synthetic1s\)",
    ):
        measured_pool(pool, ["synthetic", "rising"])


def test_improve_spare_no1s_measures_every_train_window_but_the_1s_bursts() -> None:
    """The shipped recipe's families name windows of its real train pool: every
    window of the three families is measured, none of the 1 s bursts."""
    from experiments.config import window_pool_of
    from experiments.train import family_of, measured_pool

    cfg = compose_train(["+experiment=improve_spare_no1s"])
    assert cfg.seed == 4 and cfg.improvement.states_per_window == 400
    pool = window_pool_of(cfg, "train", cfg.workload.train_pool)
    kept = measured_pool(pool, list(cfg.improvement.families))
    assert {family_of(w.name) for w in pool} == {"synthetic", "synthetic1s", "rising", "mixed"}
    assert [w.name for w in kept] == [
        w.name for w in pool if family_of(w.name) in ("synthetic", "rising", "mixed")
    ]
    assert len(kept) < len(pool)


def test_improve_warm_takes_every_train_window_a_round() -> None:
    """The shipped warm recipe: every train window in every round (windows >= the
    pool), the 1 s bursts' anchored, the warm variant on with its calm threshold,
    starting from the agent it improves."""
    from experiments.config import window_pool_of
    from experiments.train import family_of, round_pool, round_windows

    cfg = compose_train(["+experiment=improve_warm"])
    settings = cfg.improvement
    assert settings.warm_variant and settings.warm_calm_s == 0.3 and cfg.seed == 0
    assert cfg.train.init_from == "agents/zoo/improve_spare_no1s"
    pool = window_pool_of(cfg, "train", cfg.workload.train_pool)
    drawn, anchored = round_pool(pool, list(settings.families), list(settings.anchor_families))
    assert len(drawn) == len(pool) == settings.windows
    assert anchored == {w.name for w in pool if family_of(w.name) == "synthetic1s"}
    for number in (1, 2):
        names = [w.name for w in round_windows(drawn, settings.windows, number, 0)]
        assert sorted(names) == sorted(w.name for w in pool)


def test_the_reference_and_step_recipes_differ_from_improve_warm_in_their_options() -> None:
    """``improve_warm_reference`` is improve_warm's recipe reading reference
    seconds (on 70b the same observation, so the same weights);
    ``improve_warm_step`` saves that agent's weights with ``step_wait`` and no
    round."""
    from omegaconf import OmegaConf

    def plain(overrides: list[str]) -> dict:
        return OmegaConf.to_container(compose_train(overrides), resolve=False)

    warm = plain(["+experiment=improve_warm"])
    reference = plain(["+experiment=improve_warm_reference"])
    step = plain(["+experiment=improve_warm_step"])
    assert (warm["env"]["time_unit"], reference["env"]["time_unit"]) == ("seconds", "reference")
    assert reference == {**warm, "env": {**warm["env"], "time_unit": "reference"}}
    assert (reference["env"]["step_wait"], step["env"]["step_wait"]) == (False, True)
    assert step["train"]["init_from"] == "agents/zoo/improve_warm_reference"
    assert (reference["improvement"]["iterations"], step["improvement"]["iterations"]) == (5, 0)
    assert step == {
        **reference,
        "env": {**reference["env"], "step_wait": True},
        "train": {**reference["train"], "init_from": "agents/zoo/improve_warm_reference"},
        "improvement": {**reference["improvement"], "iterations": 0},
    }


def test_improve_warm_anchored_measures_and_warms_on_rising_load_only() -> None:
    """The shipped anchored recipe: improve_warm_reference's with step_wait, the own
    copies repeated 4 times, rising_load measured and tried with the warm variant,
    and the other three families' windows in every round for anchors only."""
    from omegaconf import OmegaConf

    from experiments.config import window_pool_of
    from experiments.train import family_of, improvement_settings, round_pool, variant_pool

    def plain(overrides: list[str]) -> dict:
        return OmegaConf.to_container(compose_train(overrides), resolve=False)

    reference = plain(["+experiment=improve_warm_reference"])
    anchored = plain(["+experiment=improve_warm_anchored"])
    assert anchored == {
        **reference,
        "env": {**reference["env"], "step_wait": True},
        "improvement": {
            **reference["improvement"],
            "warm_anchor_repeat": 4,
            "families": ["rising"],
            "warm_variant_families": ["rising"],
            "anchor_families": ["synthetic1s", "synthetic", "mixed"],
        },
    }
    cfg = compose_train(["+experiment=improve_warm_anchored"])
    settings = cfg.improvement
    pool = window_pool_of(cfg, "train", cfg.workload.train_pool)
    drawn, anchors = round_pool(pool, list(settings.families), list(settings.anchor_families))
    assert drawn == pool
    assert anchors == {w.name for w in pool if family_of(w.name) != "rising"}
    checked = improvement_settings(cfg)  # the settings' own checks pass on the recipe
    tried = variant_pool(drawn, checked.warm_variant_families)
    assert tried == {w.name for w in pool if family_of(w.name) == "rising"}
    assert {family_of(w.name) for w in pool} == {"synthetic", "synthetic1s", "rising", "mixed"}


def test_improvement_refuses_an_agent_it_cannot_improve(tmp_path: Path) -> None:
    from experiments.train import check_improvement, check_train

    cfg = compose_train([*TINY, "improvement.iterations=1", f"out_dir={tmp_path}"])
    with pytest.raises(ValueError, match=r"improvement\.iterations=1: rollout improvement trains"):
        check_train(cfg)
    route_warm = [*TINY, "agent=maskable_ppo", "env=route_warm", "improvement.iterations=1"]
    # PPO's steps after the rounds, unscored, would replace the best round
    cfg = compose_train([*route_warm, "train.total_timesteps=64"])
    with pytest.raises(ValueError, match=r"train\.val_every=0: PPO's last model would replace"):
        check_train(cfg)
    cfg = compose_train([*route_warm, "train.total_timesteps=64", "resume=somewhere"])
    with pytest.raises(ValueError, match=r"improvement\.iterations=1 with resume"):
        check_improvement(cfg)


def test_pool_seeds_add_other_seeds_train_windows_named_apart() -> None:
    """``improvement.pool_seeds``: each seed's train windows join the pool named
    ``WORKLOAD@seedS/...`` (of the same families, other traffic), recorded in
    ``registered_windows`` at their seed; the run's own seed and a trace are refused."""
    from envs.workloads.registry import plan
    from experiments.config import window_pool_of
    from experiments.train import check_improvement, family_of, seeds_pool, seeds_windows

    route_warm = [
        *TINY,
        "agent=maskable_ppo",
        "env=route_warm",
        "train.total_timesteps=0",
        "improvement.iterations=1",
    ]
    cfg = compose_train([*route_warm, "improvement.pool_seeds=[7,8]"])
    check_improvement(cfg)
    own = window_pool_of(cfg, "train", cfg.workload.train_pool)
    extra = seeds_pool(cfg, [7, 8])
    assert len(own) == 2 and len(extra) == 4
    trains = {
        s: [w.trace_id for w in plan("bursted_synthetic", s) if w.split == "train"][:2]
        for s in (7, 8)
    }
    assert [w.name for w in extra] == [
        f"bursted_synthetic@seed{s}/{trace_id}" for s in (7, 8) for trace_id in trains[s]
    ]
    assert {family_of(w.name) for w in extra} == {family_of(w.name) for w in own}
    arrivals = {tuple(r.arrival_s for r in w.requests) for w in [*own, *extra]}
    assert len(arrivals) == 6  # six windows of different traffic
    assert [w.meta["seed"] for w in extra] == [7, 7, 8, 8]
    records = seeds_windows(cfg)
    assert [(r["workload"], r["seed"], r["train"]) for r in records] == [
        ("bursted_synthetic", s, trains[s]) for s in (7, 8)
    ]
    assert seeds_pool(cfg, None) == [] and seeds_windows(compose_train(route_warm)) == []
    seed = int(cfg.workload.seed)
    with pytest.raises(ValueError, match=rf"improvement\.pool_seeds: {seed} is workload\.seed"):
        check_improvement(compose_train([*route_warm, f"improvement.pool_seeds=[1,{seed}]"]))
    trace = [*route_warm, "workload=trace", "workload.path=t.csv", "improvement.pool_seeds=[1]"]
    with pytest.raises(ValueError, match=r"improvement\.pool_seeds: a trace has no other seeds"):
        check_improvement(compose_train(trace))


def test_pool_seeds_windows_are_measured_anchored_and_varied_by_family() -> None:
    """Another seed's train windows go through ``improvement.families``,
    ``anchor_families`` and ``warm_variant_families`` as the run's own do (the
    shipped anchored recipe on a few windows of the four burst families; the
    helpers run_improvement calls, in its order)."""
    from experiments.config import window_pool_of
    from experiments.train import family_of, round_pool, seeds_pool, variant_pool

    cfg = compose_train(["+experiment=improve_warm_anchored", "workload.train_pool=6"])
    pool = [*window_pool_of(cfg, "train", 6), *seeds_pool(cfg, [1])]
    assert sum("@seed1/" in w.name for w in pool) == 6
    settings = cfg.improvement
    rounds, anchored = round_pool(pool, list(settings.families), list(settings.anchor_families))
    assert [w.name for w in rounds] == [w.name for w in pool]  # every family is in the rounds
    assert anchored == {w.name for w in pool if family_of(w.name) != "rising"}
    rising = {w.name for w in pool if family_of(w.name) == "rising"}
    assert any("@seed1/" in name for name in rising) and len(rising) < len(pool)
    assert variant_pool(rounds, list(settings.warm_variant_families)) == rising


@pytest.mark.slow
def test_train_runs_rounds_and_keeps_the_best(tmp_path: Path) -> None:
    cfg = compose_train(
        [
            *TINY,
            "agent=maskable_ppo",
            "env=route_warm",
            "train.total_timesteps=0",
            "train.evaluate=false",
            "improvement.iterations=2",
            "improvement.states_per_window=2",
            "improvement.lead_requests=20",
            "improvement.horizon_requests=30",
            "improvement.anchor_per_window=50",
            "improvement.epochs=2",
            "improvement.windows=4",
            "improvement.pool_seeds=[7]",
            f"out_dir={tmp_path}",
        ]
    )
    train(cfg)
    record = json.loads((tmp_path / "train.json").read_text())["train"]["improvement"]
    # each round draws from the own seed's two train windows and seed 7's two
    assert sorted(w.split("/")[0] for w in record["rounds"][1]["windows"]) == [
        "bursted_synthetic",
        "bursted_synthetic",
        "bursted_synthetic@seed7",
        "bursted_synthetic@seed7",
    ]
    registered = json.loads((tmp_path / "agent" / "agent.json").read_text())["registered_windows"]
    assert [r["seed"] for r in registered] == [int(cfg.workload.seed), 7]
    scores = [r["score"] for r in record["rounds"]]
    assert [r["round"] for r in record["rounds"]] == [0, 1, 2]
    assert record["best_score"] == min(scores)
    assert record["best_round"] == scores.index(min(scores))
    assert record["rounds"][1]["measured"] == 2 * 4
    assert record["wall_s"] >= sum(r["wall_s"] for r in record["rounds"][1:]) > 0
    # the saved agent is the best round's: it scores the best score again
    from agents.algorithms import load_agent
    from experiments.train import ValidationScore, window_pool_of

    model, spec = load_agent(tmp_path / "agent")
    val = window_pool_of(cfg, "val", cfg.workload.val_windows)
    assert ValidationScore(cfg, spec, val, str(cfg.train.val_score))(model) == record["best_score"]


def test_the_warm_variant_families_name_train_windows(tmp_path: Path) -> None:
    """A family with no train window in improvement.warm_variant_families is named
    before any round runs, with the families the train windows have."""
    cfg = compose_train(
        [
            *TINY,
            "agent=maskable_ppo",
            "env=route_warm",
            "train.total_timesteps=0",
            "train.evaluate=false",
            "improvement.iterations=1",
            "improvement.warm_variant=true",
            "improvement.warm_variant_families=[rising]",
            f"out_dir={tmp_path}",
        ]
    )
    with pytest.raises(
        ValueError, match=r"improvement\.warm_variant_families: no train window of family 'rising'"
    ):
        train(cfg)


def test_the_labels_do_not_depend_on_the_workers(agent: AgentPolicy) -> None:
    """Two forked workers measure the same decisions and give the same labels and
    the same fitted weights as one process."""
    windows = [synthetic_window(SMALL, window=i) for i in (3, 4)]
    settings = dict(states_per_window=2, lead_requests=10, horizon_requests=20, epochs=1)
    fitted = []
    for workers in (1, 2):
        model = copy.deepcopy(agent.model)
        stats = improve_round(
            model,
            agent.spec,
            windows,
            CLUSTER,
            SIM,
            ImprovementSettings(workers=workers, **settings),  # type: ignore[arg-type]
            seed=9,
        )
        fitted.append((stats.decisions, model.policy.state_dict()))
    (one, weights_one), (two, weights_two) = fitted
    assert one == two and len(one) == 4
    for name, value in weights_one.items():
        assert torch.equal(value, weights_two[name]), name
