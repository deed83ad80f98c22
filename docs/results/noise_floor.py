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
from typing import Any

import numpy as np
import torch
from capacity_floor_table import HERE, block, publish
from warm_rising import ANCHORED as RECIPE
from warm_rising import OUT as ROUNDS
from warm_rising import ROUND_FAMILIES, recipe_config, scored_on

from envs.files import write_json_atomic

OUT = HERE / "noise_floor.json"
PAGE = HERE / "noise_floor.md"
START = "agents/zoo/improve_spare_no1s"
SHIPPED = "agents/zoo/improve_warm_anchored"
"""The recipe's shipped agent (its seed 0's round 3), scored beside the draws."""
SCALES = (0.001, 0.01)
"""Noise, as a share of each weight tensor's standard deviation."""
DRAWS = 10
SPLITS = {"val8": 8, "val20": None}
"""The validation windows scored: the recipe's 8 (``workload.val_windows``), and all."""


def start_agent(cfg: Any) -> tuple[Any, Any]:
    """The rounds' start: the shipped weights, read with the recipe's env (``cfg``),
    as ``experiments.train`` builds it for the run."""
    from agents.algorithms import load_agent
    from experiments.train import env_kwargs

    model, spec = load_agent(START)
    return model, replace(spec, env_kwargs=env_kwargs(cfg))


def measure() -> dict:
    from agents.algorithms import load_agent
    from experiments.config import window_pool_of

    cfg = recipe_config()
    assert cfg.workload.val_windows == SPLITS["val8"]
    windows = {name: window_pool_of(cfg, "val", limit) for name, limit in SPLITS.items()}

    def scored(model: object, spec: object) -> dict:
        """The model's score and families' geometric means on each split."""
        out: dict = {}
        for name, pool in windows.items():
            out[name], out[f"{name}_families"] = scored_on(cfg, model, spec, pool)
        return out

    model, spec = start_agent(cfg)
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
                    size = param.std() if param.numel() > 1 else param.abs()
                    param.add_(scale * size * torch.randn(param.shape, generator=generator))
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


def group_row(label: str, split: str, base: dict, found: list[tuple[float, dict]]) -> str:
    """A row of ``found`` (score, families' geometric means) against ``base``, the
    start's draw: their scores' range, how many score below the start, and each
    family's change."""
    if not found:
        return (
            f"| {label} | {split[3:]} | 0 | - | - | "
            + " | ".join("-" for _ in ROUND_FAMILIES)
            + " |"
        )
    scores = [score for score, _ in found]
    changes = [
        spread([pct(fams[f], base[f"{split}_families"][f]) for _, fams in found])
        if len(found) > 1
        else f"{pct(found[0][1][f], base[f'{split}_families'][f]):+.1f}"
        for f in ROUND_FAMILIES
    ]
    below = sum(score < base[split] for score in scores)
    if len(found) == 1:
        moved = " | ".join(changes)
        verdict = "yes" if below else "no"
        return f"| {label} | {split[3:]} | 1 | {scores[0]:.4f} | {verdict} | {moved} |"
    return (
        f"| {label} | {split[3:]} | {len(found)} | {min(scores):.4f}-{max(scores):.4f} "
        f"| {below} | {' | '.join(changes)} |"
    )


def table(data: dict) -> list[str]:
    """Each scale's draws, the shipped agent and the rounds of warm_rising.json's
    runs that were scored on the same windows, against the start."""
    start = data["draws"][0]
    fams = " | ".join(f"`{f}`" for f in ROUND_FAMILIES)
    lines = [
        f"| weights | windows | draws | score, lowest and highest | below the start | {fams} |",
        "|---|---|--:|---|--:|" + "---|" * len(ROUND_FAMILIES),
    ]
    shipped = data["shipped"]
    for split in SPLITS:
        dashes = " | ".join("-" for _ in ROUND_FAMILIES)
        lines.append(f"| the start | {split[3:]} | 1 | {start[split]:.4f} | - | {dashes} |")
        for scale in SCALES:
            draws = [d for d in data["draws"] if d["scale"] == scale]
            found = [(d[split], d[f"{split}_families"]) for d in draws]
            lines.append(group_row(f"noise {scale:g}", split, start, found))
        found = [(shipped[split], shipped[f"{split}_families"])]
        lines.append(group_row(f"`{Path(SHIPPED).name}` (trained)", split, start, found))
        found = [(r["score"], r["families_ttft_mean_s"]) for r in rounds(start[split])]
        label = "the rounds of warm_rising.md's runs scored on these windows (trained)"
        lines.append(group_row(label, split, start, found))
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
