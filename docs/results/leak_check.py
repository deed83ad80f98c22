"""How much the shared bursts of sibling families' windows matter for the test
figures: ``leak_check.md``.

    python docs/results/leak_check.py

Window i of ``bursted_synthetic``, ``bursted_synthetic_1s`` and ``mixed`` sends the
same bursts and decoys (docs/workloads.md), while each family's train/test split
is its own. A test window of one of them is *leaked* for an agent when a sibling's
window of the same index is among the train windows the agent, or an agent it
started from (``train.init_from``) or cloned its teacher on (``imitation.workloads``),
trained on; else *clean*. The windows an agent trained on are read from its recipe
(``conf/experiment/``, composed as ``python -m experiments.train +experiment=NAME``
composes it) and the registry's split: every train window of each workload of its
lineage, an upper bound (behavioural cloning ran 2 episodes on a pool of 4 train
windows), so a clean window is surely clean.

Reads the stored per-window means (``ttft_mean_s_per_window``) of every
``agents_vs_baselines*.json``, ``*_test.json`` and ``leak_check.json`` (written by
``leak_check_measure.py``) and the window request counts from the generator, and
compares each agent with the best baseline and with ``oracle_warm`` pooled
(request-weighted, as the pages' mean TTFT is) over the leaked and over the clean
windows apart.
"""

from __future__ import annotations

import functools
import json
import math
import re
import textwrap
from pathlib import Path
from typing import Any

from capacity_floor_table import REPLACED

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent

SIBLINGS = ("synthetic", "synthetic1s", "mixed")
"""The families whose window i draws its bursts and decoys from the same stream."""
WORKLOADS = {
    "bursted_synthetic": "synthetic",
    "bursted_synthetic_1s": "synthetic1s",
    "mixed": "mixed",
}
"""The registered workload that evaluates each sibling family alone."""
ZOO = ROOT / "agents" / "zoo"


def experiment_of(agent: str) -> str:
    """The recipe (``conf/experiment/NAME.yaml``) that made a zoo agent: its own name's,
    else the first ``+experiment=`` of its README's rebuild command."""
    if (ROOT / "conf" / "experiment" / f"{agent}.yaml").exists():
        return agent
    found = re.search(r"\+experiment=([\w-]+)", (ZOO / agent / "README.md").read_text())
    if found is None:
        raise ValueError(f"agents/zoo/{agent}/README.md: no +experiment= rebuild command")
    return found.group(1)


@functools.cache
def _recipe(experiment: str) -> tuple[tuple[str, ...], str, int, str | None]:
    """(the workloads it trained or cloned on, the training workload's parameters as
    JSON, the data seed, the agent it started from) of one recipe."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from experiments.config import register_configs

    register_configs()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name="train", overrides=[f"+experiment={experiment}"])
    workloads = [str(cfg.workload.name)]
    if int(cfg.imitation.episodes) > 0:
        workloads += [str(w) for w in cfg.imitation.workloads]
    params = OmegaConf.to_container(cfg.workload.params, resolve=True) or {}
    start = cfg.train.get("init_from")
    return (
        tuple(workloads),
        json.dumps(params, sort_keys=True),
        int(cfg.workload.seed),
        None if start is None else Path(str(start)).name,
    )


def lineage(agent: str) -> list[str]:
    """The agent and those it started from, newest first."""
    out = [agent]
    while (start := _recipe(experiment_of(out[-1]))[3]) is not None:
        out.append(start)
    return out


@functools.cache
def train_windows_seen(agent: str) -> frozenset[tuple[str, int]]:
    """(family, index) of every train window of every workload of the agent's lineage."""
    from envs.workloads.registry import configure, plan

    seen: set[tuple[str, int]] = set()
    for name in lineage(agent):
        workloads, params, seed, _ = _recipe(experiment_of(name))
        for i, workload in enumerate(workloads):
            scenario = configure(workload, **(json.loads(params) if i == 0 else {}))
            seen |= {(s.family, s.index) for s in plan(scenario, seed) if s.split == "train"}
    return frozenset(seen)


@functools.cache
def test_indices(family: str) -> tuple[int, ...]:
    """The test windows' indices of a sibling family evaluated alone, in the order the
    commands run them (its workload's test split at the default counts)."""
    from envs.workloads.registry import plan

    workload = {f: w for w, f in WORKLOADS.items()}[family]
    return tuple(s.index for s in plan(workload) if s.split == "test")


def leaked(seen: set[tuple[str, int]] | frozenset[tuple[str, int]], family: str) -> set[int]:
    """The test windows of ``family`` a sibling's train window among ``seen`` shares
    its bursts with."""
    return {i for i in test_indices(family) if any((f, i) in seen for f in SIBLINGS if f != family)}


BASELINES = ("btb", "btb_tuned", "btb_pending", "cache_aware", "least_load", "dynamo", "llmd")
"""Issue #16's baselines (``capacity_floor_table.BASELINES``): the best of those a
file holds is the one an agent is compared with."""
ORACLE = "oracle_warm"
NOT_AGENTS = (*BASELINES, ORACLE, "floor", "floor_capacity", "btb_eft", "eft", "eft_pull_spread")
RECIPES = (
    ("thresholds_eft", "ppo_thresholds_eft"),
    ("thresholds_spread", "ppo_thresholds_spread"),
    ("thresholds", "ppo_thresholds"),
)
"""A threshold agent's rows (training seeds, ``s0_det`` ...) by their file's name: its recipe."""
MEASURED = "leak_check.json"


@functools.cache
def request_counts(workload: str) -> tuple[int, ...]:
    """Requests of each test window of a sibling family's workload, in run order."""
    from envs.workloads.registry import window_rows

    return tuple(len(rows) for _, rows in window_rows(workload, "test"))


def zoo_agent(policy: str, source: str) -> str | None:
    """The zoo agent whose lineage a row's agent has: the zoo name the policy is or
    starts with (``finetune_families_long_s1``), else its file's recipe; None for a
    row no zoo recipe made."""
    names = sorted((p.name for p in ZOO.iterdir() if (p / "agent.json").exists()), key=len)
    for name in reversed(names):
        if policy == name or policy.startswith(name + "_"):
            return name
    for part, recipe in RECIPES:
        if part in source and re.fullmatch(r"s\d+_det|s\d+_stoch", policy):
            return recipe
    return None


def _pooled(means: list[float], counts: tuple[int, ...], at: list[int]) -> float:
    return sum(means[p] * counts[p] for p in at) / sum(counts[p] for p in at)


def stored_rows() -> list[dict[str, Any]]:
    """Every stored row with per-window means on a sibling family's test windows (the
    first ``windows`` of them): its file, and its pooled mean checked against its
    per-window means and the generator's request counts."""
    out = []
    files = sorted(HERE.glob("agents_vs_baselines*.json")) + sorted(HERE.glob("*_test.json"))
    for path in [*files, HERE / MEASURED]:
        for row in json.loads(path.read_text())["rows"]:
            if row["workload"] not in WORKLOADS or "ttft_mean_s_per_window" not in row:
                continue
            if row.get("subset", "all") != "all":
                continue
            counts = request_counts(row["workload"])[: row["windows"]]
            pooled = _pooled(row["ttft_mean_s_per_window"], counts, list(range(len(counts))))
            if abs(pooled / row["ttft_mean_s"] - 1) > 1e-9:
                where = f"{path.name}: {row['policy']} on {row['setup']} {row['workload']}"
                raise ValueError(f"{where}: per-window means pool to {pooled}, not ttft_mean_s")
            out.append({**row, "source": path.stem})
    return out


Change = tuple[float, float, float]
"""An agent's mean TTFT against another policy's, pooled over the leaked, the clean
and all windows: agent / other - 1."""


def changes(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each greedy agent row of a stored file on a sibling family: its leaked and clean
    windows and its change against the file's best baseline and oracle_warm."""
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault((row["source"], row["setup"], row["workload"]), []).append(row)
    out = []
    for (source, setup, workload), group in sorted(groups.items()):
        family = WORKLOADS[workload]
        by_policy = {r["policy"]: r for r in group}
        baselines = [r for r in group if r["policy"] in BASELINES]
        best = min(baselines, key=lambda r: r["ttft_mean_s"]) if baselines else None
        for row in group:
            agent = zoo_agent(row["policy"], source)
            if row["policy"] in NOT_AGENTS or agent is None or "stoch" in row["policy"]:
                continue
            n = row["windows"]
            order = test_indices(family)[:n]
            dirty = leaked(train_windows_seen(agent), family)
            at = {
                "leaked": [p for p, i in enumerate(order) if i in dirty],
                "clean": [p for p, i in enumerate(order) if i not in dirty],
                "all": list(range(n)),
            }
            counts = request_counts(workload)[:n]
            versus: dict[str, Change | None] = {}
            for name, other in (("best_change", best), ("oracle", by_policy.get(ORACLE))):
                if other is None or other["windows"] != n:
                    versus[name] = None
                    continue
                versus[name] = tuple(  # type: ignore[assignment]
                    _pooled(row["ttft_mean_s_per_window"], counts, at[k])
                    / _pooled(other["ttft_mean_s_per_window"], counts, at[k])
                    - 1
                    if at[k]
                    else float("nan")
                    for k in ("leaked", "clean", "all")
                )
            out.append(
                {
                    "source": source,
                    "agent": row["policy"],
                    "zoo": agent,
                    "setup": setup,
                    "workload": workload,
                    "n_leaked": len(at["leaked"]),
                    "n_clean": len(at["clean"]),
                    "best": best["policy"] if best else None,
                    **versus,
                }
            )
    return out


def kept_rows(found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per agent, setup and family, from the file with the most windows (the
    first such file by name), and only those with a policy to compare against."""
    best: dict[tuple[str, str, str, str], dict[str, Any]] = {}
    for row in found:
        if row["best_change"] is None and row["oracle"] is None:
            continue
        key = (row["zoo"], row["agent"], row["setup"], row["workload"])
        if (
            key not in best
            or row["n_leaked"] + row["n_clean"] > best[key]["n_leaked"] + best[key]["n_clean"]
        ):
            best[key] = row
    return sorted(best.values(), key=lambda r: (r["source"], r["agent"], r["setup"], r["workload"]))


def controls(rows: list[dict[str, Any]], used: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """oracle_warm, which learns nothing, against the best baseline on the same leaked
    and clean windows as each file's agents (the windows' own difference)."""
    out = []
    seen = set()
    for kept in used:
        key = (kept["source"], kept["setup"], kept["workload"])
        if key in seen or kept["best"] is None:
            continue
        seen.add(key)
        group = {r["policy"]: r for r in rows if (r["source"], r["setup"], r["workload"]) == key}
        oracle, best = group.get(ORACLE), group[kept["best"]]
        if oracle is None or oracle["windows"] != best["windows"]:
            continue
        n = best["windows"]
        dirty = leaked(train_windows_seen(kept["zoo"]), WORKLOADS[kept["workload"]])
        order = test_indices(WORKLOADS[kept["workload"]])[:n]
        counts = request_counts(kept["workload"])[:n]
        at = [
            [p for p, i in enumerate(order) if i in dirty],
            [p for p, i in enumerate(order) if i not in dirty],
            list(range(n)),
        ]
        change = tuple(
            _pooled(oracle["ttft_mean_s_per_window"], counts, a)
            / _pooled(best["ttft_mean_s_per_window"], counts, a)
            - 1
            for a in at
        )
        if any((o["setup"], o["workload"], o["best_change"]) == (*key[1:], change) for o in out):
            continue  # the same oracle_warm and baseline rows in another file
        out.append({**kept, "agent": ORACLE, "best_change": change, "oracle": None})
    return out


def _pct(value: float | None) -> str:
    return "" if value is None or math.isnan(value) else f"{value:+.1%}"


def windows_table() -> list[str]:
    """Which test windows of each sibling family are leaked, agents with the same
    windows on one row."""
    agents = sorted(p.name for p in ZOO.iterdir() if (p / "agent.json").exists())
    groups: dict[tuple[tuple[int, ...], ...], list[str]] = {}
    for agent in agents:
        seen = train_windows_seen(agent)
        key = tuple(tuple(sorted(leaked(seen, f))) for f in SIBLINGS)
        groups.setdefault(key, []).append(agent)
    lines = [
        "| agents | "
        + " | ".join(f"`{f}` leaked (of {len(test_indices(f))})" for f in SIBLINGS)
        + " |",
        "|---|" + "---|" * len(SIBLINGS),
    ]
    for key, names in groups.items():
        cells = [
            f"{len(ix)}: " + (", ".join(f"{i:04d}" for i in ix) if ix else "none") for ix in key
        ]
        lines.append("| " + ", ".join(f"`{n}`" for n in names) + " | " + " | ".join(cells) + " |")
    clean = [
        f"`{f}` " + ", ".join(f"{i:04d}" for i in test_indices(f) if i not in set(ix))
        for f, ix in zip(SIBLINGS, next(iter(groups)))
    ]
    lines += [
        "",
        f"Clean test windows of the agents on the first row: {'; '.join(clean)}.",
        "",
        "These count every train window of each workload of an agent's lineage. An "
        "agent whose `agent.json` records the windows it trained on (and those of the "
        "agent it started from; `bc_route_warm`'s record is its cloning's pool of train "
        "windows) may have seen fewer; `evaluate`'s note counts those.",
    ]
    return lines


def changes_table(kept: list[dict[str, Any]]) -> list[str]:
    lines = [
        "| file | agent | setup | workload | windows leaked / clean | best baseline "
        "| vs best: leaked | clean | all | vs oracle_warm: leaked | clean | all |",
        "|---|---|---|---|--:|---|--:|--:|--:|--:|--:|--:|",
    ]
    for row in kept:
        best = row["best"] or ""
        b = row["best_change"] if row.get("best_change") else (None, None, None)
        o = row["oracle"] or (None, None, None)
        lines.append(
            f"| {row['source']} | `{row['agent']}` | {row['setup']} | {row['workload']} "
            f"| {row['n_leaked']} / {row['n_clean']} | {best} | "
            + " | ".join(_pct(v) for v in (*b, *o))
            + " |"
        )
    return lines


def _kind(row: dict[str, Any]) -> str:
    return "threshold agents" if row["zoo"].startswith("ppo_thresholds") else "route agents"


def gaps(rows: list[dict[str, Any]], field: str, workload: str = "all") -> list[float]:
    """Leaked minus clean of ``field``'s change, rows with >= 3 windows of each, sorted."""
    return sorted(
        r[field][0] - r[field][1]
        for r in rows
        if r.get(field)
        and r["n_leaked"] >= 3
        and r["n_clean"] >= 3
        and workload in ("all", r["workload"])
    )


def summary(kept: list[dict[str, Any]], ctrl: list[dict[str, Any]]) -> list[str]:
    """How often the agents gain more on their leaked windows than on their clean ones,
    and by how much, beside oracle_warm on the same windows."""
    lines = [
        "| compared | against | workload | rows | gains more on leaked "
        "| leaked minus clean: mean | median | min | max |",
        "|---|---|---|--:|--:|--:|--:|--:|--:|",
    ]
    groups = [
        (f"`{ORACLE}` (control)", ctrl, "best_change"),
        *(
            (kind, [r for r in kept if _kind(r) == kind], field)
            for kind in ("route agents", "threshold agents")
            for field in ("best_change", "oracle")
        ),
    ]
    for what, rows, field in groups:
        for workload in ("all", *WORKLOADS):
            found = gaps(rows, field, workload)
            if not found:
                continue
            against = "oracle_warm" if field == "oracle" else "best baseline"
            lines.append(
                f"| {what} | {against} | {workload} | {len(found)} | {sum(g < 0 for g in found)} "
                f"| {_pp(sum(found) / len(found))} | {_pp(found[len(found) // 2])} "
                f"| {_pp(found[0])} | {_pp(found[-1])} |"
            )
    return lines


def _pp(value: float) -> str:
    return f"{100 * value:+.1f} pp"


def measured(subset: str) -> dict[tuple[str, str, str], dict[str, Any]]:
    """``leak_check.json``'s rows over ``subset`` ("all", "clean", "leaked")."""
    rows = json.loads((HERE / MEASURED).read_text())["rows"]
    return {(r["setup"], r["workload"], r["policy"]): r for r in rows if r["subset"] == subset}


def check_measured() -> None:
    """The measured rows over all 15 windows are the stored ones the target cells read."""
    stored = {}
    for name in ("capacity_floor.json", "rollout_improvement_test.json"):
        for row in json.loads((HERE / name).read_text())["rows"]:
            stored[(row["setup"], row["workload"], row["policy"])] = row
    for key, row in measured("all").items():
        for stat in ("ttft_mean_s", "ttft_p95_s"):
            if row[stat] is not None and key in stored and row[stat] != stored[key][stat]:
                raise ValueError(
                    f"{MEASURED}: {key} {stat} {row[stat]} != stored {stored[key][stat]}"
                )


def cells_table() -> list[str]:
    """Issue #16's cells (``target_cells.py``) on the sibling families, over all 15
    test windows and over the clean ones only, targets and agents alike."""
    from capacity_floor_table import targets
    from target_cells import AGENTS

    check_measured()
    every, clean = measured("all"), measured("clean")
    setups = sorted({key[0] for key in every})
    lines = [
        "| setup | workload | stat | target: requires (all 15) | (clean) | "
        + " | ".join(f"`{a}`" for a in AGENTS)
        + " |",
        "|---|---|---|---|---|" + "--:|" * len(AGENTS),
    ]
    met = {a: [0, 0] for a in AGENTS}
    flips = []
    for setup in setups:
        for workload in WORKLOADS:
            for stat in ("mean", "p95"):
                pairs = zip(
                    targets(every, setup, workload, stat), targets(clean, setup, workload, stat)
                )
                for (what, need), (what_clean, need_clean) in pairs:
                    marks = []
                    for agent in AGENTS:
                        a = every[(setup, workload, agent)][f"ttft_{stat}_s"]
                        c = clean[(setup, workload, agent)][f"ttft_{stat}_s"]
                        ok, ok_clean = a <= need, c <= need_clean
                        met[agent][0] += ok
                        met[agent][1] += ok_clean
                        if ok != ok_clean:
                            flips.append(f"`{agent}`'s {setup} {workload} {stat} ({what_clean})")
                        marks.append(
                            f"{'met' if ok else 'missed'} ({a / need - 1:+.1%}) → "
                            f"{'met' if ok_clean else 'missed'} ({c / need_clean - 1:+.1%})"
                        )
                    lines.append(
                        f"| {setup} | {workload} | {stat} | {what}: {need:.4g} "
                        f"| {what_clean}: {need_clean:.4g} | " + " | ".join(marks) + " |"
                    )
    totals = " | ".join(f"**{m[0]} → {m[1]}**" for m in met.values())
    lines.append(f"| **met** | | | | | {totals} |")
    lines += [
        "",
        "Cells whose status changes on the clean windows: " + (", ".join(flips) or "none") + ".",
    ]
    return lines


def measured_control() -> list[float]:
    """``oracle_warm`` against the best baseline (over all 15 windows) in
    ``leak_check.json``, leaked minus clean, each setup and workload, sorted."""
    from capacity_floor_table import best_baseline

    every, dirty, clean = measured("all"), measured("leaked"), measured("clean")
    out = []
    for setup, workload, policy in every:
        if policy != ORACLE:
            continue
        best, _ = best_baseline(every, setup, workload, "mean")
        part = [
            rows[(setup, workload, ORACLE)]["ttft_mean_s"]
            / rows[(setup, workload, best)]["ttft_mean_s"]
            for rows in (dirty, clean)
        ]
        out.append(part[0] - part[1])
    return sorted(out)


def findings(kept: list[dict[str, Any]], ctrl: list[dict[str, Any]]) -> str:
    """What the tables show, in words, from the rows themselves."""
    from target_cells import AGENTS

    ours = [r for r in kept if r["source"] == Path(MEASURED).stem and r["agent"] in AGENTS]
    mine = gaps(ours, "best_change")
    net = gaps(ours, "oracle")
    control = measured_control()
    every, every_net, every_control = (
        gaps(kept, "best_change"),
        gaps(kept, "oracle"),
        gaps(ctrl, "best_change"),
    )
    mean_net = sum(every_net) / len(every_net)
    setups = ", ".join(sorted({r["setup"] for r in ours}))
    text = (
        f"What it shows. On {setups}, the {len(AGENTS)} route-and-warm agents of "
        f"[target_cells.md](target_cells.md) gain more on their leaked windows than on "
        f"their clean ones in {sum(g < 0 for g in mine)} of their {len(mine)} (agent, setup, "
        f"workload) rows against the best baseline (leaked minus clean {_pp(mine[0])} to "
        f"{_pp(mine[-1])}; positive: less gain on the leaked windows) and in "
        f"{sum(g < 0 for g in net)} of {len(net)} against `oracle_warm` on the same windows "
        f"({_pp(net[0])} to {_pp(net[-1])}); `oracle_warm`, which learns nothing, moves "
        f"against the best baseline by {_pp(control[0])} to {_pp(control[-1])} between the "
        f"two parts. Over every stored row: {sum(g < 0 for g in every)} of {len(every)} agent "
        f"rows gain more on the leaked windows against the best baseline (mean "
        f"{_pp(sum(every) / len(every))}), {sum(g < 0 for g in every_control)} of "
        f"{len(every_control)} of `oracle_warm`'s (mean "
        f"{_pp(sum(every_control) / len(every_control))}), and {sum(g < 0 for g in every_net)} "
        f"of {len(every_net)} agent rows against `oracle_warm` (mean {_pp(mean_net)}). "
    )
    if mean_net >= 0 and sum(g < 0 for g in net) * 2 < len(net):
        text += (
            "So nothing here says the shared bursts helped the agents' test figures: what "
            "they gain on the leaked windows the windows themselves give `oracle_warm` too, "
            "and the route-and-warm agents gain more where nothing was seen. "
        )
    else:
        text += "So the leaked windows may flatter the agents: read the clean columns. "
    thresholds = [r for r in kept if _kind(r) == "threshold agents"]
    for workload in WORKLOADS:
        found = gaps(thresholds, "oracle", workload)
        if found and sum(g < 0 for g in found) * 2 > len(found) and sum(found) < 0:
            text += (
                f"The threshold agents on `{workload}` lean the other way: "
                f"{sum(g < 0 for g in found)} of {len(found)} rows gain more on the leaked "
                f"windows net of `oracle_warm`, leaked minus clean {_pp(sum(found) / len(found))} "
                "on average "
                f"(median {_pp(found[len(found) // 2])}), small beside how far their "
                "training seeds lie apart (the rows below). "
            )
    text += (
        "The leaked windows are still no test of generalising to unseen prompts; the "
        "clean ones alone are (the cells below). This bounds the effect for these agents "
        "and windows; it does not replace a leak-free split."
    )
    return textwrap.fill(text, width=86, break_on_hyphens=False, break_long_words=False)


def render() -> str:
    rows = stored_rows()
    kept = kept_rows(changes(rows))
    ctrl = controls(rows, kept)
    parts = [
        TEXT,
        findings(kept, ctrl),
        "",
        "## Which test windows are leaked",
        "",
        *windows_table(),
        "",
        SUMMARY_TEXT,
        *summary(kept, ctrl),
        "",
        CELLS_TEXT,
        *cells_table(),
        "",
        ROWS_TEXT,
        *changes_table(kept + ctrl),
    ]
    return "\n".join(parts) + "\n"


TEXT = """# Leaked and clean test windows

REPLACED

Window i of `bursted_synthetic`, `bursted_synthetic_1s` and `mixed` sends the same
bursts and decoys while each family's train/test split is its own
([workloads.md](../workloads.md#the-registry-and-splits-envsworkloadsregistrypy)), so
an agent trained on a sibling's window i has seen the prompts of test window i.
Nothing is retrained here and no split changes; this page asks whether the published
test figures lean on that. Each agent's test windows of the three families are split
into *leaked* (a sibling's window of the same index is among the train windows of the
agent's lineage: its recipe's workload, the agents it started from, `train.init_from`,
and the workloads its teacher was cloned on, `imitation.workloads`, each with every
train window of the registry's split: an upper bound, so a clean window is surely
clean) and *clean*, and the agent's mean TTFT is compared with the best baseline's
and `oracle_warm`'s pooled over each part (request-weighted, as the pages' mean TTFT
is). If the leak helped, an agent gains more on its leaked windows. The windows
differ in themselves too, so `oracle_warm`, which learns nothing, is measured on the
same parts as a control, and the agent against `oracle_warm` is its gain net of the
windows' own difference.

Written by [leak_check.py](leak_check.py) from the stored per-window means
(`ttft_mean_s_per_window`) of `agents_vs_baselines*.json` and `*_test.json`, each
row's pooled by the generator's request counts checked against its stored mean, and
from `leak_check.json`, which [leak_check_measure.py](leak_check_measure.py) wrote on
2026-12-06 and again on 2026-12-07 with `improve_warm_anchored`: the runs of
[target_cells.md](target_cells.md) (its route-and-warm agents, the baselines,
`oracle_warm` and the floors; all 15 test windows, evaluation seed 0, causal KV,
greedy agents), whose rows over all 15 windows equal the stored ones to the last
digit (checked), kept over the leaked and the clean windows apart, p95 included.
""".replace("\nREPLACED\n", f"\n{REPLACED}\n", 1)

SUMMARY_TEXT = """## Do the agents gain more on leaked windows?

Leaked minus clean: the agent's change against the best baseline (or `oracle_warm`)
over its leaked windows minus that over its clean ones, in percentage points;
negative: more gain on the leaked windows. Rows with at least 3 leaked and 3 clean
windows (the 5-window `*_test.json` rows are listed below, not counted); a threshold
agent's training seeds and setups each count, so the rows are not independent.
"""

CELLS_TEXT = """## The target cells on clean windows

Issue #16's cells of [target_cells.md](target_cells.md) on the three families, over
all 15 test windows (as published) and over the clean ones only, targets (the best
baseline and `oracle_warm` over the same windows) and agents alike: "all → clean".
"""

ROWS_TEXT = """## Every stored row

Greedy agents; each (agent, setup, workload) from the file with the most windows; the
best baseline is the file's best of issue #16's baselines over all its windows;
changes are the agent's pooled mean TTFT over the leaked, the clean and all windows
against the same policy's over the same windows. `oracle_warm` rows: the control,
against the best baseline. Threshold agents' rows (`s0_det` ...) are their recipe's
training seeds (`ppo_thresholds`, `_eft`, `_spread`, by the file).
"""


def main() -> None:
    text = render()
    (HERE / "leak_check.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
