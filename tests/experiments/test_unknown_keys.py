"""Every key a schema does not know is refused, in every command and every group:
Hydra's ``+key=value`` adds keys past the schema, a group or experiment file's
unknown key fails to compose, and the key=value commands refuse unknown options,
dotted ones included. All in-process."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf

from experiments._cli import UsageError
from experiments.config import CONF_DIR, check_known_keys, register_configs, unknown_keys
from tests.experiments.test_cli_errors import _hydra_job as hydra_job

register_configs()


GROUP_KEYS = [
    # a misspelt trace option (window_s): the trace schema's keys are listed first
    ("+workload.window=60", "workload.window", "workload takes: path, format"),
    ("+workload.bogus=1", "workload.bogus", "workload takes: path, format"),
    ("+sim.bogus=1", "sim.bogus", "sim takes: causal_kv, copy_model"),
    ("+model.bogus=1", "model.bogus", "model takes: name"),
    ("+cluster.bogus=1", "cluster.bogus", "cluster takes: node, n_nodes"),
    ("+setup.bogus=1", "setup.bogus", "setup takes: name"),
    ("+logger.bogus=1", "logger.bogus", "logger takes: kind, mode"),
    ("+bogus=1", "bogus", "the command takes: setup, model"),
]
TRAIN_KEYS = [
    ("+env.bogus=1", "env.bogus", "env takes: kind, reward_scale"),
    ("+agent.bogus=1", "agent.bogus", "agent takes: algo, net, hidden, critic"),
    ("+train.bogus=1", "train.bogus", "train takes: total_timesteps"),
    ("+imitation.bogus=1", "imitation.bogus", "imitation takes: episodes"),
]


@pytest.mark.parametrize(
    ("name", "override", "key", "known"),
    [
        *[("train", *case) for case in GROUP_KEYS + TRAIN_KEYS],
        # the other commands share the groups' schemas: a few of them each
        *[("evaluate", *case) for case in GROUP_KEYS[:3]],
        *[("tune_btb", *case) for case in GROUP_KEYS[2:5]],
        # groups a command does not have at all
        ("evaluate", "+env.bogus=1", "env", "the command takes: setup"),
        ("tune_btb", "+agent.hidden=8", "agent", "the command takes: setup"),
    ],
)
def test_a_plus_key_no_schema_knows_is_refused_naming_it(
    name: str, override: str, key: str, known: str
) -> None:
    with (
        hydra_job(name, ["logger=none", "workload=tiny", override]) as cfg,
        pytest.raises(ValueError) as error,
    ):
        check_known_keys(cfg)
    message = str(error.value)
    assert message.startswith(f"unknown key {key} (from the command line); {known}")
    assert "\n" not in message


@pytest.mark.parametrize("name", ["train", "evaluate", "tune_btb"])
def test_the_job_refuses_it_before_its_run_folder(name: str, tmp_path: Path) -> None:
    from experiments import evaluate, train, tune_btb

    fn = {"train": train.train, "evaluate": evaluate.evaluate, "tune_btb": tune_btb.objective}
    run = tmp_path / "run"
    # +sim.bogus=1 used to reach SimConfig(**...) as a TypeError
    overrides = ["logger=none", "workload=tiny", "+sim.bogus=1", f"out_dir={run}"]
    refused = r"^unknown key sim\.bogus \(from the command line\)"
    with hydra_job(name, overrides) as cfg, pytest.raises(ValueError, match=refused):
        fn[name](cfg)
    assert not run.exists()


@pytest.mark.parametrize(
    "override",
    ["+workload.params.n_bursts=3", "+agent.hyperparams.vf_coef=0.5", "+imitation.teacher.x=1"],
)
def test_free_form_dicts_are_left_to_what_reads_them(override: str) -> None:
    # workload.params goes to the generators' configs, hyperparams to SB3's checks,
    # the teacher's settings to the teacher: each names an unknown key there
    with hydra_job("train", ["logger=none", override]) as cfg:
        check_known_keys(cfg)


@pytest.mark.parametrize(
    ("folder", "text", "choice"),
    [
        ("experiment", "# @package _global_\nworkload:\n  bogus: 1\n", "+experiment=mine"),
        ("workload", "name: bursted_synthetic\nbogus: 1\n", "workload=mine"),
        ("sim", "causal_kv: true\nbogus: 1\n", "sim=mine"),
    ],
)
def test_an_unknown_key_in_a_config_file_does_not_compose(
    folder: str, text: str, choice: str, tmp_path: Path
) -> None:
    (tmp_path / folder).mkdir()
    (tmp_path / folder / "mine.yaml").write_text(text)
    with (
        initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"),
        pytest.raises(ConfigCompositionException) as error,
    ):
        compose("train", overrides=[f"hydra.searchpath=[file://{tmp_path}]", choice])
    message = f"{error.value} {error.value.__cause__}"
    assert f"'{folder}/mine'" in message and "Key 'bogus' not in" in message


@dataclass
class _Inner:
    size: int = 1


@dataclass
class _Schema:
    name: str = "x"
    inner: _Inner = field(default_factory=_Inner)
    extra: dict[str, Any] = field(default_factory=dict)


def test_the_check_follows_the_schema_it_is_given() -> None:
    cfg = OmegaConf.structured(_Schema)
    for key, value in (("inner.colour", "red"), ("extra.anything", 1), ("other", 2)):
        OmegaConf.update(cfg, key, value, force_add=True)  # what Hydra's + does
    assert list(unknown_keys(cfg)) == [
        ("inner.colour", ["size"]),
        ("other", ["name", "inner", "extra"]),
    ]


@pytest.mark.parametrize("module", ["compare", "reproduce", "bench", "make_dataset", "audit"])
@pytest.mark.parametrize("arg", ["sim.bogus=1", "+workload.bogus=1", "workload.bogus=1"])
def test_key_value_commands_refuse_dotted_unknown_keys(module: str, arg: str) -> None:
    import importlib
    import re

    main = importlib.import_module(f"experiments.{module}").main
    key = arg.partition("=")[0]
    with pytest.raises(UsageError, match=f"unknown option '{re.escape(key)}'"):
        main([arg])


@pytest.mark.parametrize(
    "override",
    ["env.bogus=1", "train.totl_timesteps=5", "workload.window=60", "env.progress=false"],
)
def test_without_the_plus_an_unknown_key_is_said_as_with_it(
    override: str, tmp_path: Path, run_command: Any
) -> None:
    """Hydra refuses ``env.bogus=1`` itself and says to write ``+env.bogus=1``, which
    the project's check then refuses as unknown: both are one and the same line."""
    base = ["logger=none", "workload=tiny", "env=thresholds", f"out_dir={tmp_path / 'run'}"]
    plain = run_command("experiments.train", [*base, override], tmp_path)
    plus = run_command("experiments.train", [*base, "+" + override], tmp_path)
    assert plain.returncode == plus.returncode == 2
    key = override.partition("=")[0]
    assert plain.stderr.startswith(
        f"error: experiments.train: unknown key {key} (from the command line); "
    )
    assert plain.stderr == plus.stderr
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("override", "said"),
    [
        ("agent.hyperparams.n_step=64", "agent.hyperparams.n_step: not a ppo hyperparameter; "),
        ("agent.hyperparams.seed=3", "agent.hyperparams.seed: set by the run "),
        # a key under it: the + one named no origin (nothing set agent.hyperparams.n_step)
        ("agent.hyperparams.n_step.x=64", "agent.hyperparams.n_step: not a ppo hyperparameter; "),
        ("agent.hyperparams.policy_kwargs.x=1", "agent.hyperparams.policy_kwargs: set by the run "),
        ("workload.params.n_burst=2", "workload 'bursted_synthetic': unknown parameter(s) "
         "workload.params.n_burst (known: "),
    ],
)  # fmt: skip
def test_a_free_form_dict_s_unknown_key_without_the_plus_is_said_as_with_it(
    override: str, said: str, tmp_path: Path, run_command: Any
) -> None:
    """Hydra refused ``agent.hyperparams.n_step=64`` saying to add it with ``+``, and
    ``+agent.hyperparams.n_step=64`` was then refused as no hyperparameter: a typo in
    an SB3 setting or a generator parameter took two runs to find. The reader's own
    refusal is now said at once, as for the schemas' keys."""
    base = ["logger=none", "workload=tiny", f"out_dir={tmp_path / 'run'}"]
    plain = run_command("experiments.train", [*base, override], tmp_path)
    plus = run_command("experiments.train", [*base, "+" + override], tmp_path)
    assert plain.returncode == plus.returncode == 2
    assert plain.stderr.startswith(f"error: experiments.train: {said}")
    assert plain.stderr.rstrip("\n").endswith(" (from the command line)")
    assert plain.stderr == plus.stderr and plain.stderr.count("\n") == 1
    assert not (tmp_path / "run").exists()


def test_a_key_added_under_a_set_value_is_said_to_come_from_the_command_line(
    tmp_path: Path, run_command: Any
) -> None:
    """``+agent.hyperparams.learning_rate.x=1`` makes the group file's rate a dict on
    the command line: the refusal named conf/agent/ppo.yaml as where it came from."""
    args = ["logger=none", "workload=tiny", "+agent.hyperparams.learning_rate.x=1"]
    proc = run_command("experiments.train", [*args, f"out_dir={tmp_path / 'run'}"], tmp_path)
    assert (proc.returncode, proc.stderr) == (
        2,
        "error: experiments.train: agent.hyperparams.learning_rate must be a finite number "
        ">= 0, got {'x': 1} (from the command line)\n",
    )
    assert not (tmp_path / "run").exists()


def test_a_trace_s_parameter_without_the_plus_is_said_as_with_it(
    tmp_path: Path, run_command: Any
) -> None:
    """A trace takes no ``workload.params``: Hydra said to add ``workload.params.x=1``
    with ``+``, and that run was refused too. Both say the refusal, and where the key
    came from (the + one said no origin: the key was the dict's, not ``workload.params``)."""
    trace = Path(__file__).resolve().parents[2] / "examples" / "mooncake_example.jsonl"
    base = ["logger=none", "workload=trace", f"workload.path={trace}"]
    said = (
        "error: experiments.train: workload.params does not apply to workload=trace (its "
        "options are workload.path, workload.window_s, ...) (workload.params.x from the "
        "command line)\n"
    )
    for override in ("workload.params.x=1", "+workload.params.x=1"):
        args = [*base, override, f"out_dir={tmp_path / 'run'}"]
        proc = run_command("experiments.train", args, tmp_path)
        assert (proc.returncode, proc.stderr) == (2, said), override
    assert not (tmp_path / "run").exists()


def test_a_free_form_key_its_reader_takes_keeps_hydra_s_advice(
    tmp_path: Path, run_command: Any
) -> None:
    # clip_range is a PPO hyperparameter that conf/agent/ppo.yaml does not set: adding it
    # with + is the way, as Hydra says
    args = ["logger=none", "workload=tiny", "agent.hyperparams.clip_range=0.1"]
    proc = run_command("experiments.train", [*args, f"out_dir={tmp_path / 'run'}"], tmp_path)
    assert proc.returncode == 2
    assert "use +agent.hyperparams.clip_range=0.1" in proc.stderr


@pytest.mark.parametrize(
    ("name", "override", "message"),
    [
        ("train", "+progress=false", "unknown key progress (from the command line) "
         "(did you mean train.progress?); the command takes: setup"),
        ("train", "+causal_kv=false", "unknown key causal_kv (from the command line) "
         "(did you mean sim.causal_kv?); the command takes: setup"),
        ("train", "+y_tokens=8192", "unknown key y_tokens (from the command line) "
         "(did you mean env.y_tokens?); the command takes: setup"),
        ("evaluate", "+hidden=8", "unknown key hidden (from the command line); "
         "the command takes: setup"),  # evaluate has no agent group: nothing to offer
        # a group's key is looked for in that group's own groups (env has none)
        ("train", "+env.progress=false", "unknown key env.progress (from the command line); "
         "env takes: kind"),
    ],
)  # fmt: skip
def test_a_key_given_without_its_group_says_where_it_lives(
    name: str, override: str, message: str
) -> None:
    with (
        hydra_job(name, ["logger=none", "workload=tiny", override]) as cfg,
        pytest.raises(ValueError) as error,
    ):
        check_known_keys(cfg)
    assert str(error.value).startswith(message)


def test_hydra_s_own_refusal_says_it_too(tmp_path: Path, run_command: Any) -> None:
    out = tmp_path / "run"
    proc = run_command(
        "experiments.train", ["logger=none", "progress=false", f"out_dir={out}"], tmp_path
    )
    assert proc.returncode == 2
    assert proc.stderr.startswith(
        "error: experiments.train: unknown key progress (from the command line) "
        "(did you mean train.progress?); the command takes: setup"
    )
    assert not out.exists()
