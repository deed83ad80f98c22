"""The shipped agents (agents/zoo/*) load, fit the current observation encoder and act."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from agents.adapter import AgentPolicy
from envs.sim import ClusterSpec, SimConfig, Simulator, setup_cluster
from envs.workloads.bursted import BurstedSyntheticConfig, synthetic_window

ZOO = Path(__file__).resolve().parents[2] / "agents" / "zoo"
AGENTS = sorted(p.name for p in ZOO.iterdir() if (p / "agent.json").is_file())
SMALL = BurstedSyntheticConfig(n_bursts=2, burst_requests=30, n_decoys=4, burst_window_s=4.0)


@pytest.mark.parametrize("name", AGENTS)
def test_zoo_agent_serves_a_window(name):
    folder = ZOO / name
    assert (folder / "README.md").is_file()
    assert (folder / "model.zip").stat().st_size < 1_000_000
    agent = AgentPolicy.load(folder)
    assert agent.name == name
    window = synthetic_window(SMALL, window=2)
    sim = Simulator(setup_cluster("70b_h100x4"), window, SimConfig(), np.random.default_rng(0))
    records = agent.run(sim)
    ttft = np.asarray(records.ttft_s)
    assert ttft.size == len(window.requests) and np.isfinite(ttft).all()


def test_route_warm_agent_warms_the_bursts_and_not_the_decoys():
    agent = AgentPolicy.load(ZOO / "bc_route_warm")
    window = synthetic_window(SMALL, window=2)
    sim = Simulator(setup_cluster("70b_h100x4"), window, SimConfig(), np.random.default_rng(0))
    agent.run(sim)
    decoys = {r.blocks[-2] for r in window.requests if r.job_kind == "decoy"}
    assert sim.copies and not any(c.key in decoys for c in sim.copies)


@pytest.mark.parametrize("n_nodes", [2, 6])
@pytest.mark.parametrize("name", AGENTS)
def test_zoo_agent_trained_on_four_nodes_serves_other_node_counts(name, n_nodes):
    agent = AgentPolicy.load(ZOO / name)
    assert agent.trained_nodes == 4
    window = synthetic_window(SMALL, window=2)
    cluster = ClusterSpec.uniform("llama-3.3-70b", "4xH100", n_nodes)
    sim = Simulator(cluster, window, SimConfig(), np.random.default_rng(0))
    records = agent.run(sim)
    assert len(records.ttft_s) == len(window.requests)
    assert set(np.unique(records.node)) <= set(range(n_nodes))
    assert all(0 <= c.dst < n_nodes and 0 <= c.src < n_nodes for c in sim.copies)


def test_route_warm_agent_on_six_nodes_uses_and_warms_the_extra_nodes():
    agent = AgentPolicy.load(ZOO / "bc_route_warm")
    assert agent.action_sizes(6) == [6, 2, 2, 2, 2, 2, 2, 7]
    window = synthetic_window(SMALL, window=2)
    six = ClusterSpec.uniform("llama-3.3-70b", "4xH100", 6)
    sim = Simulator(six, window, SimConfig(), np.random.default_rng(0))
    records = agent.run(sim)
    assert {4, 5} & set(np.unique(records.node))
    assert {4, 5} & {c.dst for c in sim.copies}


def _family(window) -> str:
    """``burst_families/synthetic1s-0020`` -> ``synthetic1s``."""
    return window.name.split("/")[1].rsplit("-", 1)[0]


def _settings_by_family(agent: AgentPolicy, setup: str) -> dict[str, list[tuple]]:
    """A thresholds agent's greedy settings, epoch by epoch, on validation window 20
    of each family of burst_families, by family; on the way, that the agent's
    metrics (a result row's counts) count each rule's epochs."""
    from envs.windows import window_pool

    logs = {}
    for window in window_pool("burst_families", "val", 20260721, 4):
        sim = Simulator(setup_cluster(setup), window, SimConfig(), np.random.default_rng(0))
        agent.run(sim)
        settings = [setting for _, setting in agent.settings_log]
        rules = [rule for *_, rule in settings]
        assert agent.metrics() == {f"epochs_rule_{r}": float(rules.count(r)) for r in set(rules)}
        logs[_family(window)] = settings
    return logs


def test_thresholds_agent_adapts_to_the_regime():
    """The shipped ppo_thresholds (greedy) changes its settings within an episode and
    sets them by regime (validation windows 20 of burst_families, 70b_h100x4): on the
    1 s bursts it keeps more nodes warm (mean M higher) and a lower minimum prefix than
    on each other family, and takes btb_pending's rule in every epoch there, where on
    ``rising_load`` it takes the published one in most."""
    logs = _settings_by_family(AgentPolicy.load(ZOO / "ppo_thresholds"), "70b_h100x4")
    assert all(len(set(log)) > 1 for log in logs.values())  # it adapts within an episode
    others = ("synthetic", "rising", "mixed")
    mean_m = {family: np.mean([m for _, _, m, _, _ in log]) for family, log in logs.items()}
    assert mean_m["synthetic1s"] > max(mean_m[f] for f in others)
    least = {family: np.mean([p for *_, p, _ in log]) for family, log in logs.items()}
    assert least["synthetic1s"] < min(least[f] for f in others)
    assert {rule for *_, rule in logs["synthetic1s"]} == {"pending"}
    rising = [rule for *_, rule in logs["rising"]]
    assert rising.count("resident") > len(rising) / 2


def test_thresholds_eft_agent_sets_btb_apart_by_regime():
    """The shipped ppo_thresholds_eft (greedy, trained on llama-3.3-70b) changes its
    settings within an episode and sets them by regime (validation windows 20 of
    burst_families, 70b_h100x4): on the 1 s bursts a longer count window Z than on
    the 60 s bursts (mostly 8 s against 0.25 s there), and btb_pending's rule
    (``pending+eft``) in most epochs of ``mixed``, where it keeps the published one
    (``resident+eft``) in most epochs of the other three families."""
    logs = _settings_by_family(AgentPolicy.load(ZOO / "ppo_thresholds_eft"), "70b_h100x4")
    assert all(len(set(log)) > 1 for log in logs.values())  # it adapts within an episode
    mean_z = {family: np.mean([z for _, z, *_ in log]) for family, log in logs.items()}
    assert mean_z["synthetic1s"] > 2 * mean_z["synthetic"]
    share = {
        family: {
            rule: sum(r == rule for *_, r in log) / len(log)
            for rule in ("pending+eft", "resident+eft")
        }
        for family, log in logs.items()
    }
    assert share["mixed"]["pending+eft"] > 0.5
    assert all(share[f]["resident+eft"] > 0.5 for f in ("synthetic", "synthetic1s", "rising"))


def test_thresholds_spread_agent_stands_btb_aside_on_fast_bursts_only():
    """The shipped ppo_thresholds_spread (greedy, trained on qwen3-8b) hands the 1 s
    bursts and rising_load to eft_pull_spread (the ``spread`` rule, BTB aside) in
    most epochs, and keeps BTB routing (``pending+eft``) in most epochs of the 60 s
    bursts (validation windows 20 of burst_families, qwen3_8b_h100x4)."""
    from envs.windows import window_pool
    from experiments.evaluation import evaluate_policies

    agent = AgentPolicy.load(ZOO / "ppo_thresholds_spread")
    logs = _settings_by_family(agent, "qwen3_8b_h100x4")
    share = {}
    for family, log in logs.items():
        rules = [rule for *_, rule in log]
        share[family] = {rule: rules.count(rule) / len(rules) for rule in set(rules)}
    assert share["synthetic1s"]["spread"] > 0.8 and share["rising"] == {"spread": 1.0}
    assert share["synthetic"]["pending+eft"] > 0.5 > share["synthetic"].get("spread", 0)
    # a result row sums the counts over its windows (here the first two, run above)
    two = window_pool("burst_families", "val", 20260721, 2)
    (result,) = evaluate_policies({"a": agent}, "qwen3_8b_h100x4", two, SimConfig(), seed=0)
    counts = {k: v for k, v in result.row.items() if k.startswith("epochs_rule_")}
    assert sum(counts.values()) == sum(len(logs[_family(w)]) for w in two)
    assert counts["epochs_rule_spread"] > 0


@pytest.mark.parametrize("name", AGENTS)
def test_a_zoo_agent_s_recipe_trains_its_seed(name):
    """``python -m experiments.train +experiment=RECIPE`` (the recipe of the agent's
    name, or the one its README names) composes to the seed the agent was trained
    with, so the bare command reproduces the shipped agent."""
    import json
    import re

    from hydra import compose, initialize_config_dir

    from experiments.config import register_configs

    register_configs()
    conf = ZOO.parents[1] / "conf"
    recipe = name if (conf / "experiment" / f"{name}.yaml").is_file() else None
    if recipe is None:
        named = re.findall(r"\+experiment=(\w+)", (ZOO / name / "README.md").read_text())
        assert named, f"{name}: no recipe of its name and none named in its README"
        recipe = named[0]
    with initialize_config_dir(config_dir=str(conf), version_base="1.3"):
        cfg = compose(config_name="train", overrides=[f"+experiment={recipe}"])
    assert cfg.seed == json.loads((ZOO / name / "agent.json").read_text())["seed"]


@pytest.mark.parametrize("name", AGENTS)
def test_a_zoo_agent_trained_before_the_landing_check_is_reproduced_with_it_off(name):
    """An agent trained before 2026-12-05 (its ``agent.json`` records no
    ``copy_landing_check``, or false) was trained in the simulator whose warm copies
    landed whatever their source and target had lost: its README's training
    command says ``sim.copy_landing_check=false``, without which the recipe trains
    another agent (docs/physics.md, "Warm copies (RDMA)")."""
    import json

    sim = json.loads((ZOO / name / "agent.json").read_text())["env_kwargs"]["sim"]
    commands = [
        line
        for line in (ZOO / name / "README.md").read_text().splitlines()
        if "python -m experiments.train +experiment=" in line
    ]
    assert commands
    before = not sim.get("copy_landing_check", False)
    for line in commands:
        assert ("sim.copy_landing_check=false" in line) == before, (name, line)


def _sampled(names: list[str], windows: list, seed: int = 0) -> dict[str, list[float]]:
    """Each sampling agent's per-window mean TTFTs, the agents run in ``names``' order."""
    from experiments.evaluation import evaluate_policies

    policies = {}
    for name in names:
        agent = AgentPolicy.load(ZOO / name.removesuffix("#2"), name=name)
        agent.deterministic = False
        policies[name] = agent
    runs = evaluate_policies(policies, "70b_h100x4", windows, SimConfig(), seed=seed, baseline=None)
    return {run.row["policy"]: [float(w.ttft_s.mean()) for w in run.windows] for run in runs}


def test_a_sampled_agent_s_row_does_not_depend_on_the_agents_run_before_it():
    windows = [synthetic_window(SMALL, window=w) for w in (2, 3)]
    agent = "scratch_route_warm"  # a policy that is not sure of itself: sampling moves it
    alone = _sampled([agent], windows)[agent]
    after = _sampled(["ppo_thresholds_eft", f"{agent}#2", agent], windows)
    assert after[agent] == alone  # two agents drew before it: the same draws
    assert after[f"{agent}#2"] == alone  # the same agent twice: the same row
    assert _sampled([agent], windows, seed=1)[agent] != alone  # another seed, other draws
    greedy = AgentPolicy.load(ZOO / agent)
    sim = Simulator(setup_cluster("70b_h100x4"), windows[0], SimConfig(), np.random.default_rng(0))
    assert alone[0] != pytest.approx(float(np.mean(greedy.run(sim).ttft_s)), rel=1e-6)


def test_the_sampling_stream_leaves_the_simulators_draws_alone():
    from agents.adapter import sampling_stream

    rng = np.random.default_rng([0, 3])
    first = sampling_stream(rng).initial_seed()
    assert sampling_stream(rng).initial_seed() == first  # made again: the same stream
    assert rng.random() == np.random.default_rng([0, 3]).random()  # no draw taken
    assert sampling_stream(np.random.default_rng([0, 4])).initial_seed() != first


def test_a_shipped_agent_loads_by_name_from_python() -> None:
    from agents import ZOO
    from agents.adapter import AgentPolicy

    by_name = AgentPolicy.load("improve_warm_step")
    by_folder = AgentPolicy.load(ZOO / "improve_warm_step")
    assert by_name.spec == by_folder.spec
    with pytest.raises(TypeError, match=r"^folder must be a path or a shipped agent's name"):
        AgentPolicy.load(None)  # type: ignore[arg-type]


def test_a_mistyped_agent_name_lists_the_shipped_agents(tmp_path) -> None:
    from agents import zoo_names
    from agents.adapter import AgentPolicy

    with pytest.raises(FileNotFoundError) as raised:
        AgentPolicy.load("improve_warm_stp")
    message = str(raised.value)
    assert message.startswith(
        "improve_warm_stp: no such file or folder, nor a shipped agent's name (agents/zoo/: "
    )
    assert "improve_warm_step" in zoo_names()
    assert all(name in message for name in zoo_names())
    # a folder that is there but holds no agent is still said as such
    with pytest.raises(FileNotFoundError, match=r"not an agent checkpoint \(no agent\.json\)$"):
        AgentPolicy.load(tmp_path)


@pytest.mark.parametrize("name", ["improve_warm_step", "ppo_thresholds_spread"])
def test_a_shipped_agent_that_has_run_pickles_and_copies(name: str) -> None:
    """Its encoder or epoch controller keeps the compiled twin's module, which does
    not pickle (TypeError under the compiled core); copies serve a window alike."""
    import copy
    import pickle

    import numpy as np

    from agents.adapter import AgentPolicy
    from envs.sim import Simulator, setup_cluster
    from envs.workloads.registry import windows

    window = next(windows("bursted_synthetic", limit=1, n_bursts=2, burst_requests=20, n_decoys=2))
    policy = AgentPolicy.load(name)
    first = policy.run(Simulator(setup_cluster("70b_h100x4"), window)).ttft_s
    for twin in (pickle.loads(pickle.dumps(policy)), copy.deepcopy(policy)):
        again = twin.run(Simulator(setup_cluster("70b_h100x4"), window)).ttft_s
        assert np.array_equal(again, first)


NO_CURVE = {
    "bc_route_warm": "behavioural cloning only: no validation rounds",
    "bc_route_warm_spare": "behavioural cloning only: its seeds' validation scores instead",
    "improve_warm_step": "improve_warm_reference's weights, unchanged",
}


@pytest.mark.parametrize("name", AGENTS)
def test_a_zoo_agent_s_readme_gives_its_rebuild_command_and_training_curve(name):
    """What README.md says of every zoo folder: its README gives the command that
    rebuilds it and its training curve on validation windows, but for the agents
    that train nothing RL-like (NO_CURVE)."""
    text = (ZOO / name / "README.md").read_text()
    assert "python -m experiments.train +experiment=" in text
    assert ("Training curve" in text) == (name not in NO_CURVE), name
