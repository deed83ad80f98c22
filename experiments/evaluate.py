"""Evaluate saved agents and baselines side by side on held-out test windows.

    python -m experiments.evaluate checkpoint=[runs/train/X/agent,agents/zoo/NAME] \\
        [policies=[btb,cache_aware,least_load]] [setup=…] [workload=…] \\
        [workload.eval_windows=15] [sim=reference] [seed=0] [out_dir=PATH] \
        [split=val] [stochastic=true] [+policy_kwargs.btb.y_tokens=8192] \\
        [allow_seen_windows=false]

Writes ``results.json`` (the comparison run's schema), charts and, with a
threshold agent, ``thresholds_settings.json`` to the run folder; returns the
mean TTFT a sweep ranks the run by (the best agent's: :func:`reads`).
``split=val`` evaluates on the validation windows (for model choices; test
windows are for final tables); ``stochastic=true`` adds a
row per agent sampling its actions (``<agent>_stochastic``, torch seeded with
``seed``) beside the greedy one;
``+policy_kwargs.POLICY.KEY=VALUE`` sets a baseline's setting (compare's
``policy_kwargs=POLICY.KEY=VALUE``), or an agent's (a threshold agent's
``y_tokens``: what its BTB keys a prefix on, ``agents.adapter.AGENT_SETTINGS``).
An agent trained on the trace evaluated is not run on windows that overlap in time
those it was trained or validated on (``split=val``: trained on), nor one trained on
a registered workload on its own windows (other window counts, such as
``+workload.params.train_windows=1``, shuffle others to test): refused in one
line naming it, unless ``allow_seen_windows=true`` (then a one-line warning);
evaluated on a registered workload, a note gives the options that evaluate it on
its trace's windows (:mod:`experiments.trained_on`).
"""

from __future__ import annotations

from typing import Any

import hydra
from omegaconf import DictConfig, OmegaConf

from envs.sim.errors import echoed
from envs.workloads.trace_options import TRACE_WORKLOAD
from experiments import sweeps
from experiments.config import (
    cluster_of,
    register_configs,
    setup_label,
    sim_of,
    window_pool_of,
    workload_label,
    workload_params,
)
from experiments.evaluation import BOUNDS, DEFAULT_BASELINE, check_timeline_window
from experiments.jobs import (
    agent_labels,
    check_policy_names,
    check_world,
    eval_windows,
    evaluate_and_write,
    evaluation_header,
    hydra_entry,
    job_logger,
    measured_on,
    run_dir,
    run_job,
)
from experiments.trained_on import (
    RECORDS,
    agent_run,
    check_seen_windows,
    cluster_notes,
    plugin_notes,
    sibling_notes,
    trace_notes,
)

register_configs()


def _validation_windows(folders: list[Any]) -> dict[str, list[str]]:
    """The validation windows each checkpoint's training run scored on, by folder, as
    its ``train.json`` (or ``results.json``) records them (``train.validation``);
    checkpoints whose run recorded none (the zoo's, runs without ``train.val_every``)
    are left out."""
    from envs.files import read_json

    found = {}
    for folder in folders:
        run = agent_run(folder)
        for name in RECORDS:
            try:
                record = read_json(run / name)
                windows = record["train"]["validation"]["windows"]
            except (OSError, ValueError, KeyError, TypeError):
                continue
            if isinstance(windows, list) and all(isinstance(w, str) for w in windows):
                found[str(folder)] = windows
            break
    return found


def evaluate(cfg: DictConfig) -> float:
    import torch

    from agents import agent_folder, zoo_names
    from agents.adapter import AgentPolicy
    from baselines.policy import POLICIES, make_policy

    torch.set_num_threads(1)  # tiny networks, one decision at a time: threads only add overhead
    check_world(cfg)
    check_policy_names(cfg.policies, "policies")
    from experiments.compare import (
        check_folders_once,
        check_policy_nodes,
        configure_agents,
        policy_settings,
    )

    if cfg.split not in ("test", "val"):
        raise ValueError(f"split must be test or val, got {echoed(cfg.split)}")
    folders = []
    for item in cfg.checkpoint:
        folder = agent_folder(str(item))
        if folder is None:
            from agents.algorithms import run_folder_hint

            raise ValueError(
                f"checkpoint: {item!r} is not an agent checkpoint (no agent.json there"
                f"{run_folder_hint(str(item))}) nor a shipped agent's name (agents/zoo/: "
                f"{', '.join(zoo_names())})"
            )
        folders.append(folder)
    check_folders_once("checkpoint", [str(item) for item in cfg.checkpoint], folders)
    loaded = [AgentPolicy.load(folder) for folder in folders]
    labels = agent_labels([agent.name for agent in loaded], [str(f) for f in folders])
    agents = {}
    for agent, label in zip(loaded, labels):
        if label in POLICIES:
            raise ValueError(f"checkpoint: agent name {label!r} is a baseline's name")
        agent.name = label
        agent.check_cluster(cluster_of(cfg), sim_of(cfg))  # before any run, not its first window
        agents[label] = agent
    every = policy_settings(
        OmegaConf.to_container(cfg.policy_kwargs, resolve=True),  # type: ignore[arg-type]
        list(dict.fromkeys([DEFAULT_BASELINE, *cfg.policies])),
        agents,
    )
    settings = configure_agents(agents, every)
    built = {name: make_policy(name, **kwargs) for name, kwargs in settings.items()}
    # a value no policy takes, or one the cluster cannot take: before the run folder
    check_policy_nodes(built, settings, int(cfg.cluster.n_nodes))
    for label, agent in list(agents.items()):
        if cfg.stochastic:
            sampling = AgentPolicy(agent.model, agent.spec, deterministic=False)
            sampling.configured = dict(agent.configured)
            sampling.name = f"{label}_stochastic"
            agents[sampling.name] = sampling
    from experiments.compare import OUTPUTS

    windows = eval_windows(cfg, cfg.workload.eval_windows, str(cfg.split))  # before the run folder
    trained_in = {label: str(folder) for label, folder in zip(labels, folders)}
    seen = check_seen_windows(
        agents,
        trained_in,
        str(cfg.workload.name),
        workload_params(cfg),
        str(cfg.split),
        cfg.workload.eval_windows,
        bool(cfg.allow_seen_windows),
        seed=int(cfg.workload.seed),
    )
    check_timeline_window(cfg.timeline_window, len(windows), "timeline_window")
    for agent in agents.values():  # its settings against the windows' blocks
        for window in windows:
            agent.check_workload(window)
    out_dir = run_dir(cfg, "evaluate", OUTPUTS)
    logger = job_logger(cfg, out_dir, "evaluate")
    cap = cfg.workload.eval_windows
    print(evaluation_header(cfg, len(windows), str(cfg.split)))
    if cfg.workload.name != TRACE_WORKLOAD:
        shown = workload_label(cfg, held_out=str(cfg.split) != "train")
        for note in trace_notes(agents, trained_in, shown, seen):
            print(note)
    for note in cluster_notes(agents, cluster_of(cfg), setup_label(cfg)):
        print(note)
    for note in plugin_notes(agents, trained_in, str(cfg.workload.name)):
        print(note)
    for note in sibling_notes(
        agents,
        trained_in,
        str(cfg.workload.name),
        workload_params(cfg),
        int(cfg.workload.seed),
        str(cfg.split),
        cfg.workload.eval_windows,
    ):
        print(note)
    scored_on = _validation_windows(folders)
    names = [w.name for w in windows]
    for scored_folder, run_windows in scored_on.items():
        if cfg.split == "val" and run_windows != names:
            k = len(run_windows)
            print(
                f"note: split=val evaluates {len(names)} validation window"
                + ("" if len(names) == 1 else "s")
                + f"; the run of {scored_folder} scored on {k} ({', '.join(run_windows)}), "
                + f"which workload.eval_windows={k}, its workload and its seed reproduce"
            )
    trained = cfg.workload.val_windows
    if cfg.split == "val" and trained != cap and not scored_on:  # the windows training scores on
        n = len(windows)
        if cap is None or n < cap:  # these are every validation window
            scored = n if trained is None else min(trained, n)
        elif trained is not None and trained <= cap:
            scored = trained
        else:  # training may score more than these: count them
            scored = len(window_pool_of(cfg, "val", trained))
        if scored != n:
            shown = "null" if trained is None else trained
            print(
                f"note: split=val evaluates {n} validation windows "
                f"(workload.eval_windows); training scores on {scored} "
                f"(workload.val_windows={shown}: workload.eval_windows={shown} and the "
                "training's seed reproduce its scores)"
            )
    try:
        rows = evaluate_and_write(
            agents,
            list(cfg.policies),
            cfg,
            out_dir,
            logger,
            bool(cfg.progress),
            windows=windows,
            policy_kwargs=settings,
            timeline_window=int(cfg.timeline_window),
        )
    except BaseException as error:  # W&B records the run as failed (or interrupted)
        logger.finish(error)
        raise
    logger.finish()
    print(f"wrote {out_dir / 'results.json'} and what goes with it (charts, settings)")
    scores = {r["policy"]: r["ttft_mean_s"] for r in rows if r["policy"] not in BOUNDS}
    which = reads(list(agents), list(cfg.policies))
    if which == "best agent":
        of = min(agents, key=lambda name: scores[name])
    elif which == "best baseline":
        of = min(scores, key=lambda name: scores[name])
    else:
        of = which
    value = scores[of]
    measure = f"{cfg.split} mean TTFT (s)"
    policies = {  # a sweep over one policy's settings reads that policy's score instead
        name: {"name": f"{measure}, {name}", "value": score, "settings": every.get(name, {})}
        for name, score in scores.items()
    }
    # the seed too: it draws the simulator's random stream, no model choice
    basis = measured_on(cfg, [w.name for w in windows], split=str(cfg.split), seed=int(cfg.seed))
    # a sweep chooses its best job on validation windows only
    sweeps.note(f"{measure}, {which}", value, cfg.split == "val", basis, policies, of)
    return value


def reads(agents: list[str], policies: list[str]) -> str:
    """Whose mean TTFT a run returns and a sweep ranks it by: the best agent's if
    it runs an agent; else the one policy asked for besides the reference
    (DEFAULT_BASELINE, always run), or the reference alone; else the best
    baseline's. A sweep whose jobs differ in one policy's settings reads that
    policy's score instead (:func:`experiments.sweeps.note`)."""
    if agents:
        return "best agent"
    asked = [name for name in dict.fromkeys(policies) if name != DEFAULT_BASELINE]
    if len(asked) > 1:
        return "best baseline"
    return asked[0] if asked else DEFAULT_BASELINE


@hydra.main(version_base="1.3", config_path="../conf", config_name="evaluate")
def main(cfg: DictConfig) -> float:
    return run_job(evaluate, cfg)


if __name__ == "__main__":
    raise SystemExit(hydra_entry("experiments.evaluate", main))
