"""zoo_check: every shipped agent's README command, and one of them run again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from experiments import zoo_check
from experiments._cli import UsageError

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", zoo_check.zoo_agents())
def test_every_readme_gives_one_command_that_composes(name: str) -> None:
    """The command zoo_check would run is the README's, and Hydra composes it: an
    experiment renamed or an option dropped since the README was written fails here."""
    from experiments.config import register_configs

    args = zoo_check.readme_command(name)
    assert args[0].startswith("+experiment=")
    assert (ROOT / "conf" / "experiment" / f"{args[0].split('=')[1]}.yaml").is_file()
    register_configs()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name="train", overrides=[*args, "logger=none"])
    # as the agent was trained (its agent.json; saved before the option existed: off)
    trained = json.loads((ROOT / "agents" / "zoo" / name / "agent.json").read_text())
    assert cfg.sim.copy_landing_check is trained["env_kwargs"]["sim"].get(
        "copy_landing_check", False
    )


def test_the_zoo_has_its_agents() -> None:
    assert {"bc_route_warm_spare", "improve_warm_step", "ppo_thresholds"} <= set(
        zoo_check.zoo_agents()
    )


def test_a_readme_with_no_command_or_two_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a").mkdir()
    line = "    python -m experiments.train +experiment=x out_dir=runs/a\n"
    (tmp_path / "a" / "README.md").write_text(f"# a\n\n{line}\n{line}")
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "README.md").write_text("# b\n\nno command\n")
    monkeypatch.setattr(zoo_check, "ZOO", tmp_path)
    monkeypatch.setattr(zoo_check, "ROOT", tmp_path)
    with pytest.raises(ValueError, match=r"^a/README.md gives 2 indented "):
        zoo_check.readme_command("a")
    with pytest.raises(ValueError, match=r"^b/README.md gives 0 indented "):
        zoo_check.readme_command("b")
    (tmp_path / "a" / "README.md").write_text(f"# a\n\n{line}")
    assert zoo_check.readme_command("a") == ["+experiment=x"]  # (out_dir= is the check's)


def test_an_unknown_agent_is_one_line_naming_the_zoo() -> None:
    said = (
        r"^experiments.zoo_check: agents: no shipped agent 'nope' \(from the command line\); "
        r"the zoo's: bc_route_warm, "
    )
    with pytest.raises(UsageError, match=said):
        zoo_check.main(["agents=nope"])


def test_weights_compared_by_sha256_and_by_their_largest_difference() -> None:
    """The same file: the same sha256 and no difference; two clones of the same
    network trained on other teachers: other weights, by a difference worked out
    here from the tensors themselves."""
    import io
    import zipfile

    import torch

    one = ROOT / "agents" / "zoo" / "bc_route_warm"
    two = ROOT / "agents" / "zoo" / "bc_route_warm_spare"
    assert zoo_check.weights_sha256(one) == zoo_check.weights_sha256(one)
    assert zoo_check.weights_sha256(one) != zoo_check.weights_sha256(two)
    assert zoo_check.largest_difference(one, one) == 0.0

    def tensors(path: Path) -> dict:
        with zipfile.ZipFile(path / "model.zip") as archive:
            return torch.load(io.BytesIO(archive.read("policy.pth")), weights_only=True)

    a, b = tensors(one), tensors(two)
    expected = max(float((a[k].double() - b[k].double()).abs().max()) for k in a)
    assert expected > 0
    assert zoo_check.largest_difference(one, two) == expected
    # another network: no difference to give
    thresholds = ROOT / "agents" / "zoo" / "ppo_thresholds"
    assert zoo_check.largest_difference(one, thresholds) is None


@pytest.mark.slow
def test_improve_warm_step_comes_back_identical(tmp_path: Path, capsys) -> None:
    """Its recipe trains no step from improve_warm_reference's weights (seconds), so
    its README command gives the shipped weights to the bit."""
    records = zoo_check.main(["agents=improve_warm_step", f"out_dir={tmp_path / 'out'}"])
    assert [r["identical"] for r in records] == [True]
    assert zoo_check.exit_status(records) == 0
    said = capsys.readouterr().out.splitlines()
    assert said[3].startswith("| improve_warm_step | ") and said[3].endswith(" | identical |")
    assert said[4] == "1 of 1 identical"
    saved = json.loads((tmp_path / "out" / "zoo_check.json").read_text())
    assert saved["agents"][0]["command"] == (
        "python -m experiments.train +experiment=improve_warm_step "
        f"out_dir={tmp_path / 'out' / 'improve_warm_step'} logger=none"
    )
    assert zoo_check.exit_status([{**records[0], "identical": False}]) == 1
