"""Does a thresholds agent's adaptation matter? ``thresholds_ablation.md``.

    python docs/results/thresholds_ablation.py [WINDOWS]

For each shipped thresholds agent on the setup it was trained on, on the first
WINDOWS (default 5) validation windows of each burst family (evaluation seed 0,
causal KV): the agent as it is (greedy), then the agent with one action
dimension held at the value it chose most often on that family's windows (its
other dimensions still its own), and with all five held, each at its own mode
(a combination the agent may never have chosen as a whole). If holding a
dimension costs nothing, the agent's changes of it do not matter on that
family; if it helps, they hurt. The settings in force are part of the
observation, so holding one dimension can shift the agent's other choices: a
single dimension's figure is not its effect alone. Writes
``thresholds_ablation_table.md`` here.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import torch

from agents.adapter import AgentPolicy
from envs.sim import SimConfig
from envs.thresholds import M_FRACTIONS, MIN_PREFIX_CHOICES, X_CHOICES, Z_CHOICES
from experiments.evaluation import evaluate_policies, split_windows

HERE = Path(__file__).resolve().parent
AGENTS = (
    ("ppo_thresholds", "70b_h100x4"),
    ("ppo_thresholds_eft", "70b_h100x4"),
    ("ppo_thresholds_spread", "qwen3_8b_h100x4"),
)
FAMILIES = ("bursted_synthetic", "bursted_synthetic_1s", "rising_load", "mixed")
DIMENSIONS = ("X", "Z", "M", "min prefix", "rule")


class HeldAgent(AgentPolicy):
    """A thresholds agent whose action dimensions in ``held`` are replaced by fixed
    choices; records every action it takes (after the replacement)."""

    def __init__(self, agent: AgentPolicy, held: dict[int, int], name: str) -> None:
        super().__init__(agent.model, agent.spec, deterministic=True)
        self.name = name
        self.held = held
        self.actions: list[tuple[int, ...]] = []

    def act(self, obs: np.ndarray, mask: np.ndarray | None = None) -> Any:
        action = np.array(super().act(obs, mask), dtype=np.int64)
        for dim, value in self.held.items():
            action[dim] = value
        self.actions.append(tuple(int(v) for v in action))
        return action


def mean_ttft(agent: AgentPolicy, setup: str, family: str, windows: int) -> float:
    (run,) = evaluate_policies(
        {agent.name: agent},
        setup,
        split_windows(family, limit=windows, split="val"),
        SimConfig(),
        seed=0,
        workload=family,
        trace_window=None,
    )
    return float(run.row["ttft_mean_s"])


def choice_text(agent: AgentPolicy, dim: int, index: int) -> str:
    if dim == 0:
        return f"X={X_CHOICES[index]}"
    if dim == 1:
        return f"Z={Z_CHOICES[index]:g} s"
    if dim == 2:
        return f"M={M_FRACTIONS[index]:g}"
    if dim == 3:
        return f"min {MIN_PREFIX_CHOICES[index]:,}"
    from envs.thresholds import route_choices

    kwargs = agent.spec.env_kwargs
    rules = route_choices(bool(kwargs.get("eft_rules")), bool(kwargs.get("spread_rules")))
    return rules[index]


def main(windows: int) -> None:
    torch.set_num_threads(1)
    lines = [
        "| agent (setup) | family | the agent | "
        + " | ".join(f"{d} held" for d in DIMENSIONS)
        + " | all held | per-dimension modes | epochs not at all five |",
        "|---|---|--:|" + "--:|" * len(DIMENSIONS) + "--:|---|--:|",
    ]
    for name, setup in AGENTS:
        base = AgentPolicy.load(name)
        for family in FAMILIES:
            free = HeldAgent(base, {}, name)
            agent_s = mean_ttft(free, setup, family, windows)
            counts = [Counter(a[d] for a in free.actions) for d in range(len(DIMENSIONS))]
            modal = [c.most_common(1)[0][0] for c in counts]
            away = sum(1 for a in free.actions if list(a) != modal)
            cells = []
            for dim in range(len(DIMENSIONS)):
                held_s = mean_ttft(HeldAgent(base, {dim: modal[dim]}, name), setup, family, windows)
                cells.append(f"{100 * (held_s / agent_s - 1):+.1f} %")
            everything = dict(enumerate(modal))
            all_s = mean_ttft(HeldAgent(base, everything, name), setup, family, windows)
            setting = ", ".join(choice_text(base, d, modal[d]) for d in range(len(DIMENSIONS)))
            lines.append(
                f"| `{name}` ({setup}) | {family} | {agent_s:.4f} s | "
                + " | ".join(cells)
                + f" | {100 * (all_s / agent_s - 1):+.1f} % | {setting} "
                f"| {away} of {len(free.actions)} |"
            )
            print(lines[-1], flush=True)
    head = (
        "Mean TTFT of each shipped thresholds agent on the first "
        f"{windows} validation windows of each burst family (evaluation seed 0, causal "
        "KV, greedy), and the change when one action dimension, or all five, is held "
        "at the value the agent chose most often on that family's windows, each "
        "dimension's own mode (positive: holding it is slower, so the agent's changes of "
        "it help)."
    )
    out = HERE / "thresholds_ablation_table.md"
    out.write_text(head + "\n\n" + "\n".join(lines) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    if {"-h", "--help"} & set(sys.argv[1:]):
        print(__doc__)
        sys.exit(0)
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
