"""How far the validation score moves when nothing is learned: ``noise_floor.md``.

    python docs/results/noise_floor.py measure    # measure, write the JSON and the page
    python docs/results/noise_floor.py            # the page again from the JSON

The improvement rounds of ``+experiment=improve_warm_anchored`` start from the
shipped ``improve_spare_no1s`` read with that recipe's observation
(``env.time_unit=reference``, ``env.step_wait=true``) and keep the round whose
validation score is lowest. This script scores that start, and the start with
Gaussian noise added to every weight (``SCALES`` times each tensor's standard
deviation; ``DRAWS`` draws a scale, torch generator seeds 0, 1, ...), on the
recipe's 8 validation windows and on all 20, as the rounds score them
(``experiments.train.ValidationScore``: the geometric mean of the windows' mean
TTFTs, evaluation seed 0, greedy). Nothing is
trained. The page sets the draws beside the rounds of warm_rising.json's runs,
which start from the same weights.
"""

from __future__ import annotations

import copy
import json
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch
from capacity_floor_table import HERE, block, publish
from gated_overrides import config
from warm_rising import OUT as ROUNDS
from warm_rising import ROUND_FAMILIES

from envs.files import write_json_atomic

OUT = HERE / "noise_floor.json"
PAGE = HERE / "noise_floor.md"
START = "agents/zoo/improve_spare_no1s"
SHIPPED = "agents/zoo/improve_warm_anchored"
"""The recipe's shipped agent (its seed 0's round 3), scored beside the draws."""
RECIPE = "improve_warm_anchored"
SCALES = (0.001, 0.01)
"""Noise, as a share of each weight tensor's standard deviation."""
DRAWS = 10
SPLITS = {"val8": 8, "val20": None}
"""The validation windows scored: the recipe's 8 (``workload.val_windows``), and all."""


def start_agent() -> tuple[object, object]:
    """The rounds' start: the shipped weights, read with the recipe's observation."""
    from agents.algorithms import load_agent

    model, spec = load_agent(START)
    env = {**spec.env_kwargs, "time_unit": "reference", "step_wait": True}
    return model, replace(spec, env_kwargs=env)


def measure() -> dict:
    from agents.algorithms import load_agent
    from experiments.config import window_pool_of
    from experiments.train import ValidationScore

    cfg = config([f"+experiment={RECIPE}"])
    assert cfg.workload.val_windows == SPLITS["val8"]
    windows = {name: window_pool_of(cfg, "val", limit) for name, limit in SPLITS.items()}

    def scored(model: object, spec: object) -> dict:
        """The model's score and families' geometric means on each split."""
        out: dict = {}
        for name, pool in windows.items():
            scorer = ValidationScore(cfg, spec, pool, cfg.train.val_score)
            out[name] = float(scorer(model))
            out[f"{name}_families"] = scorer.records[-1]["families_ttft_mean_s"]
        return out

    model, spec = start_agent()
    draws: list[dict] = []

    def score(scale: float, seed: int) -> None:
        draws.append({"scale": scale, "seed": seed, **scored(model, spec)})
        print(json.dumps(draws[-1]), flush=True)

    score(0.0, 0)
    shipped = {"agent": SHIPPED, **scored(*load_agent(SHIPPED))}
    weights = copy.deepcopy(model.policy.state_dict())
    for scale in SCALES:
        for seed in range(DRAWS):
            generator = torch.Generator().manual_seed(seed)
            with torch.no_grad():
                for param in model.policy.parameters():
                    spread = param.std() if param.numel() > 1 else param.abs()
                    param.add_(scale * spread * torch.randn(param.shape, generator=generator))
            score(scale, seed)
            model.policy.load_state_dict(weights)
    return {"start": START, "recipe": RECIPE, "draws": draws, "shipped": shipped}


def pct(value: float, start: float) -> float:
    return 100 * (value / start - 1)


def spread(values: list[float]) -> str:
    """mean ± std [min, max] of percentages."""
    v = np.asarray(values)
    return f"{v.mean():+.1f} ± {v.std():.1f} [{v.min():+.1f}, {v.max():+.1f}]"


def rounds(start_score: float) -> list[dict]:
    """warm_rising.json's rounds 1, 2, ... of every run from this start."""
    runs = json.loads(ROUNDS.read_text())["improvement"]
    return [
        r
        for record in runs.values()
        if record["rounds"][0]["score"] == start_score
        for r in record["rounds"][1:]
    ]


def table(data: dict) -> list[str]:
    """Each scale's draws (and the rounds) against the start: the score, how many
    draws score below it, and each family's change."""
    start = data["draws"][0]
    fams = " | ".join(f"`{f}`" for f in ROUND_FAMILIES)
    lines = [
        f"| weights | windows | draws | score, lowest and highest | below the start | {fams} |",
        "|---|---|--:|---|--:|" + "---|" * len(ROUND_FAMILIES),
    ]
    groups = [(f"noise {s:g}", [d for d in data["draws"] if d["scale"] == s]) for s in SCALES]
    for split in SPLITS:
        base, base_f = start[split], start[f"{split}_families"]
        lines.append(
            f"| the start | {split[3:]} | 1 | {base:.4f} | - | "
            + " | ".join("-" for _ in ROUND_FAMILIES)
            + " |"
        )
        for label, draws in groups:
            scores = [d[split] for d in draws]
            changes = [
                spread([pct(d[f"{split}_families"][f], base_f[f]) for d in draws])
                for f in ROUND_FAMILIES
            ]
            lines.append(
                f"| {label} | {split[3:]} | {len(draws)} | {min(scores):.4f}-{max(scores):.4f} "
                f"| {sum(s < base for s in scores)} | {' | '.join(changes)} |"
            )
        shipped = data["shipped"]
        moved = [f"{pct(shipped[f'{split}_families'][f], base_f[f]):+.1f}" for f in ROUND_FAMILIES]
        lines.append(
            f"| `{Path(SHIPPED).name}` (trained) | {split[3:]} | 1 | {shipped[split]:.4f} "
            f"| {'yes' if shipped[split] < base else 'no'} | {' | '.join(moved)} |"
        )
    base, base_f = start["val8"], start["val8_families"]
    found = rounds(base)
    scores = [r["score"] for r in found]
    changes = [
        spread([pct(r["families_ttft_mean_s"][f], base_f[f]) for r in found])
        for f in ROUND_FAMILIES
    ]
    lines.append(
        f"| the rounds of warm_rising.md (trained) | 8 | {len(found)} | "
        f"{min(scores):.4f}-{max(scores):.4f} | {sum(s < base for s in scores)} "
        f"| {' | '.join(changes)} |"
    )
    return lines


BEGIN, END = "<!-- noise_floor.py: begin -->", "<!-- noise_floor.py: end -->"


def render(data: dict) -> str:
    return block(
        BEGIN,
        END,
        [
            (
                "Validation score and families against the start (family changes in %: "
                "mean ± std [lowest, highest])",
                table(data),
            )
        ],
    )


def main(args: list[str]) -> None:
    if args not in ([], ["measure"]):
        print(__doc__, file=sys.stderr)
        raise SystemExit(2)
    if args:
        write_json_atomic(OUT, measure())
    publish(OUT, PAGE, BEGIN, END, render)


if __name__ == "__main__":
    main(sys.argv[1:])
