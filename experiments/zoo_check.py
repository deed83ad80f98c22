"""Train zoo agents again by their READMEs' commands and say whether the weights come back.

    python -m experiments.zoo_check [agents=NAME,...] [out_dir=PATH] [overwrite=false]

Each shipped agent's README (``agents/zoo/NAME/README.md``) gives the command that
made it, an indented ``python -m experiments.train +experiment=...`` line. This
command runs that line for each agent of ``agents`` (default: every agent of the
zoo), with its run folder under ``out_dir`` (default: a temporary folder, removed
after) and ``logger=none``, and compares the policy weights it saved
(``model.zip``'s ``policy.pth``) with the shipped ones: the same sha256, or the
largest difference of any weight. Prints a table as each run ends, writes
``zoo_check.json`` into ``out_dir`` when one is given, and exits with 1 when any
agent's weights came back otherwise (0 when all are identical).

Why: a deliberate numeric change (the simulator, the forecast a teacher reads, an
observation) leaves ``make run``'s rows unchanged and still makes a recipe train
other weights. Weights also follow the CPU's floating-point kernels, so run it on
the kind of machine the zoo was trained on (docs/agents.md, "The shipped agents").
The recipes take from seconds (``improve_warm_step``) to about 15 minutes each
(``improve_spare_no1s``) on 2 cores; every agent of the zoo, one to two hours (the
reruns in docs/agents.md).
"""

from __future__ import annotations

import hashlib
import io
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from envs.files import write_json_atomic
from experiments._cli import (
    FROM_COMMAND_LINE,
    UsageError,
    main_guard,
    parse_args,
)
from experiments._io import claim_out_dir, releasing_out_dirs

COMMAND = "experiments.zoo_check"
ROOT = Path(__file__).resolve().parents[1]
ZOO = ROOT / "agents" / "zoo"
DEFAULTS: dict[str, Any] = {"agents": [], "out_dir": "", "overwrite": False}
TRAIN = "python -m experiments.train "


def zoo_agents() -> list[str]:
    """The shipped agents, by folder name."""
    return sorted(p.parent.name for p in ZOO.glob("*/agent.json"))


def readme_command(name: str) -> list[str]:
    """The arguments after ``python -m experiments.train`` of the command agent
    ``name``'s README gives (its one indented line of that command), without its
    ``out_dir=``."""
    readme = ZOO / name / "README.md"
    lines = [
        line.strip()
        for line in readme.read_text(encoding="utf-8").splitlines()
        if line.startswith("    " + TRAIN)
    ]
    if len(lines) != 1:
        raise ValueError(
            f"{readme.relative_to(ROOT)} gives {len(lines)} indented `{TRAIN.strip()}` "
            "commands, not one"
        )
    return [arg for arg in shlex.split(lines[0])[3:] if not arg.startswith("out_dir=")]


def weights_sha256(folder: Path) -> str:
    """The sha256 of the policy weights an agent folder saved."""
    from agents.algorithms import saved_weights

    return hashlib.sha256(saved_weights(folder)).hexdigest()


def largest_difference(folder: Path, other: Path) -> float | None:
    """The largest absolute difference of any weight between two agent folders of the
    same network; None where their tensors differ in names or shapes."""
    import torch

    from agents.algorithms import saved_weights

    def weights(path: Path) -> dict[str, Any]:
        data = io.BytesIO(saved_weights(path))
        return dict(torch.load(data, map_location="cpu", weights_only=True))

    one, two = weights(folder), weights(other)
    if one.keys() != two.keys() or any(one[k].shape != two[k].shape for k in one):
        return None
    gaps = [float((one[k].double() - two[k].double()).abs().max()) for k in one if one[k].numel()]
    return max(gaps, default=0.0)


def check_agent(name: str, folder: Path) -> dict[str, Any]:
    """Run agent ``name``'s README command into ``folder`` and compare its weights
    with the shipped ones; the run's output goes to ``NAME.log`` beside ``folder``."""
    args = [*readme_command(name), f"out_dir={folder}", "logger=none"]
    folder.parent.mkdir(parents=True, exist_ok=True)
    log = folder.parent / f"{name}.log"
    started = time.perf_counter()
    with log.open("w", encoding="utf-8") as out:
        done = subprocess.run(
            [sys.executable, "-m", "experiments.train", *args],
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            check=False,
        )
    record: dict[str, Any] = {
        "agent": name,
        "command": f"{TRAIN}{shlex.join(args)}",
        "minutes": (time.perf_counter() - started) / 60,
        "log": str(log),
        "returncode": done.returncode,
    }
    trained = folder / "agent"
    if done.returncode != 0 or not (trained / "model.zip").is_file():
        return {**record, "identical": False, "error": _last_line(log)}
    shipped = ZOO / name
    sha = weights_sha256(trained)
    identical = sha == weights_sha256(shipped)
    return {
        **record,
        "identical": identical,
        "weights_sha256": sha,
        "largest_difference": 0.0 if identical else largest_difference(shipped, trained),
    }


def _last_line(log: Path) -> str:
    lines = [line for line in log.read_text(encoding="utf-8").splitlines() if line.strip()]
    return lines[-1] if lines else "(no output)"


def row(record: dict[str, Any]) -> str:
    """The record's line of the table."""
    if "error" in record:
        said = f"failed (exit {record['returncode']}): {record['error']}"
    elif record["identical"]:
        said = "identical"
    elif record["largest_difference"] is None:
        said = "differ (another network shape)"
    else:
        said = f"differ (largest weight difference {record['largest_difference']:.3g})"
    return f"| {record['agent']} | {record['minutes']:.1f} | {said} |"


@releasing_out_dirs
def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    options = parse_args(COMMAND, DEFAULTS, argv)
    known = zoo_agents()
    names = list(options["agents"]) or known
    for name in names:
        if name not in known:
            raise UsageError(
                f"{COMMAND}: agents: no shipped agent {name!r}{FROM_COMMAND_LINE}; "
                f"the zoo's: {', '.join(known)}"
            )
    for name in names:  # every README's command, before the first run
        try:
            readme_command(name)
        except ValueError as error:
            raise UsageError(f"{COMMAND}: agent {name}: {error}") from None
    out_dir = options["out_dir"]
    if out_dir:
        outputs = ("zoo_check.json", *names, *(f"{name}.log" for name in names))
        claim_out_dir(out_dir, f"{COMMAND}: out_dir", outputs, options["overwrite"])
    with tempfile.TemporaryDirectory(prefix="zoo_check_") as scratch:
        runs = Path(out_dir or scratch)
        print(f"{len(names)} zoo agents trained again by their READMEs' commands, in {runs}")
        print("| agent | minutes | weights against the shipped ones |")
        print("|---|--:|---|")
        records = []
        for name in names:
            records.append(check_agent(name, runs / name))
            print(row(records[-1]), flush=True)
    same = sum(r["identical"] for r in records)
    print(f"{same} of {len(records)} identical")
    if out_dir:
        path = write_json_atomic(Path(out_dir) / "zoo_check.json", {"agents": records})
        print(f"wrote {path}")
    return records


def exit_status(records: list[dict[str, Any]]) -> int:
    """0 when every agent's weights came back, else 1."""
    return 0 if all(r["identical"] for r in records) else 1


if __name__ == "__main__":
    status: list[int] = []
    code = main_guard(lambda: status.append(exit_status(main())))
    raise SystemExit(code or (status[0] if status else 0))
