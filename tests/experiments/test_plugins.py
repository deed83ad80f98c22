"""BTB_GYM_PLUGINS: a policy of the user's own module, run by name by the commands."""

from __future__ import annotations

import hashlib
import importlib
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from baselines import policy as plugins
from baselines.policy import POLICIES, Policy, RegistrationError, register
from experiments._cli import main_guard

PLUGIN = '''
from baselines.policy import Policy, register


@register("plugin_first_node")
class FirstNode(Policy):
    """Every request to node ``node``."""

    def __init__(self, node: int = 0) -> None:
        self.node = node

    def decide(self, sim, request):
        return self.node
'''


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    (tmp_path / "my_routers.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv(plugins.VARIABLE, "my_routers")
    yield "plugin_first_node"
    POLICIES.pop("plugin_first_node", None)
    sys.modules.pop("my_routers", None)
    plugins._LOADED.discard("my_routers")


@pytest.fixture
def plugin_module(tmp_path, monkeypatch):
    """``plugin_module(name, source)`` writes a plugin module and names it in
    BTB_GYM_PLUGINS; the policies it registered are forgotten afterwards."""
    written: list[str] = []

    def write(name: str, source: str) -> None:
        (tmp_path / f"{name}.py").write_text(source)
        written.append(name)
        monkeypatch.setenv(plugins.VARIABLE, name)

    monkeypatch.syspath_prepend(str(tmp_path))
    before = dict(POLICIES)
    yield write
    POLICIES.clear()
    POLICIES.update(before)
    for name in written:
        sys.modules.pop(name, None)
        plugins._LOADED.discard(name)


BUGGY = """
from baselines.policy import Policy, register


@register("buggy_decide")
class BuggyDecide(Policy):
    def decide(self, sim, request):
        return int("x1")  # a ValueError: the policy's bug, not bad input


@register("buggy_metrics")
class BuggyMetrics(Policy):
    def decide(self, sim, request):
        return 0

    def metrics(self):
        return {"mine": 1 / 0}
"""


@pytest.mark.parametrize(
    ("policy", "where", "raised", "line"),
    [
        ("buggy_decide", "decide() at request ", "ValueError: invalid literal for int() with "
         "base 10: 'x1'", 'return int("x1")'),
        ("buggy_metrics", "metrics()", "ZeroDivisionError: division by zero", "1 / 0"),
    ],
)  # fmt: skip
def test_a_plugin_s_own_bug_keeps_its_traceback_and_names_the_policy(
    plugin_module, capsys, tmp_path, policy, where, raised, line
):
    """A ValueError of the policy's own code ended compare with one line and status 2
    (read as a command-line mistake), without the policy's name nor a traceback."""
    from experiments import compare

    plugin_module("buggy_routers", BUGGY)
    argv = [f"policies={policy}", "windows=1", "charts=false", "progress=false",
            f"out_dir={tmp_path / 'run'}"]  # fmt: skip
    code = main_guard(lambda: compare.main(argv))
    err = capsys.readouterr().err
    assert code == 1
    assert "Traceback (most recent call last):" in err
    assert 'buggy_routers.py", line' in err and line in err  # into the policy's code
    last = err.rstrip("\n").splitlines()[-1]
    assert last.startswith(f"error: experiments.compare: policy {policy!r} failed in {where}")
    assert "window 'bursted_synthetic/" in last and last.endswith(raised)


def test_a_warm_the_simulator_refuses_names_the_policy(plugin_module, capsys, tmp_path):
    """A bad route named the policy; a bad warm target did not."""
    from experiments import compare

    plugin_module("warm_routers", BUGGY.replace('int("x1")', "sim.warm(0, 99, request.blocks)"))
    argv = ["policies=buggy_decide", "windows=1", "charts=false", "progress=false",
            f"out_dir={tmp_path / 'run'}"]  # fmt: skip
    code = main_guard(lambda: compare.main(argv))
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert err.startswith("error: experiments.compare: policy 'buggy_decide' at request '")
    assert err.endswith("': warm: dst must be a node index in 0..3, got 99\n")


def test_compare_runs_a_plugin_s_policy_by_name_with_its_settings(plugin, tmp_path):
    from experiments import compare

    out = tmp_path / "run"
    argv = [f"policies={plugin},cache_aware", f"policy_kwargs={plugin}.node=1", "windows=1",
            "charts=false", "progress=false", f"out_dir={out}"]  # fmt: skip
    assert main_guard(lambda: compare.main(argv)) == 0
    result = json.loads((out / "results.json").read_text())
    row = next(r for r in result["rows"] if r["policy"] == plugin)
    assert row["requests"] == 4120
    assert row["load_imbalance"] == 4.0  # every prefill on one node of the four
    assert result["config"]["policy_kwargs"] == {plugin: {"node": 1}}
    assert result["provenance"]["plugins"] == ["my_routers"]  # as before: the names
    source = tmp_path / "my_routers.py"
    assert result["provenance"]["plugin_files"] == {
        "my_routers": {
            "path": str(source.resolve()),
            "sha256": hashlib.sha256(source.read_bytes()).hexdigest(),
            "imports": [],  # it imports no module of one's own: the sha256 of its bytes
        }
    }


def test_provenance_tells_two_versions_of_a_plugin_apart(plugin_module, tmp_path):
    """provenance.plugins recorded the module's name only: two runs of different
    plugin code wrote the same provenance."""
    from experiments.provenance import provenance

    said = []
    for node in (0, 1):  # the same module, edited between the two runs
        plugin_module("edited_routers", PLUGIN.replace("node: int = 0", f"node: int = {node}"))
        plugins.load_plugins()
        said.append(provenance())
        POLICIES.pop("plugin_first_node")
        sys.modules.pop("edited_routers")
        plugins._LOADED.discard("edited_routers")
    first, second = (made["plugin_files"]["edited_routers"] for made in said)
    assert first["path"] == second["path"] == str((tmp_path / "edited_routers.py").resolve())
    assert first["sha256"] != second["sha256"]
    assert (
        second["sha256"]
        == hashlib.sha256((tmp_path / "edited_routers.py").read_bytes()).hexdigest()
    )


def test_a_router_plugin_s_sha256_covers_its_own_helper_modules(plugin_module, tmp_path):
    """provenance.plugin_files hashed the module's file alone, while a workload of
    one's own covers the modules of one's own it imports: an edited helper of a
    router plugin left its recorded sha256 as it was. Now the one rule
    (envs.workloads.plugins.code_stamp) for both."""
    from experiments.provenance import provenance

    helper = tmp_path / "router_helper.py"
    source = PLUGIN.replace("node: int = 0", "node: int = NODE")
    source = "from router_helper import NODE\n" + source
    said = []
    for node in (0, 1):  # the helper edited between the two runs, the module not
        helper.write_text(f"NODE = {node}\n")
        plugin_module("helped_routers", source)
        plugins.load_plugins()
        said.append(provenance()["plugin_files"]["helped_routers"])
        POLICIES.pop("plugin_first_node")
        for name in ("helped_routers", "router_helper"):
            sys.modules.pop(name)
        plugins._LOADED.discard("helped_routers")
    first, second = said
    assert first["imports"] == second["imports"] == [str(helper.resolve())]
    assert first["sha256"] != second["sha256"]
    module = tmp_path / "helped_routers.py"
    listing = "".join(  # sha256sum's lines, sorted by path relative to the module's folder
        f"{hashlib.sha256(file.read_bytes()).hexdigest()}  {file.name}\n"
        for file in sorted((module, helper), key=lambda file: file.name)
    )
    assert second["sha256"] == hashlib.sha256(listing.encode()).hexdigest()


def test_a_plugin_that_does_not_import_is_one_line(monkeypatch, capsys, tmp_path: Path):
    from experiments import compare

    monkeypatch.setenv(plugins.VARIABLE, "no_such_module_here")
    code = main_guard(lambda: compare.main(["policies=btb", f"out_dir={tmp_path / 'run'}"]))
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert (
        "BTB_GYM_PLUGINS=no_such_module_here: importing 'no_such_module_here' failed: "
        "ModuleNotFoundError: No module named 'no_such_module_here'" in err
    )
    assert not (tmp_path / "run").exists()
    # a file's path, as users first try it: says how to name it
    monkeypatch.setenv(plugins.VARIABLE, f"{tmp_path}/mine.py")
    code = main_guard(lambda: compare.main(["policies=btb", f"out_dir={tmp_path / 'run'}"]))
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert err.endswith(
        f"(BTB_GYM_PLUGINS takes module names, not files: PYTHONPATH={tmp_path} "
        "BTB_GYM_PLUGINS=mine)\n"
    )
    # ./mine.py makes import_module raise a TypeError (a relative name, no package), not
    # an ImportError: the hint still, with the folder as written; and a folder of a name
    raised = {}
    for given, folder, stem in (("./mine.py", ".", "mine"), ("sub/mine", "sub", "mine")):
        monkeypatch.setenv(plugins.VARIABLE, given)
        code = main_guard(lambda: compare.main(["policies=btb", f"out_dir={tmp_path / 'run'}"]))
        err = capsys.readouterr().err
        assert code == 2 and err.count("\n") == 1
        assert err.endswith(
            f"(BTB_GYM_PLUGINS takes module names, not files: PYTHONPATH={folder} "
            f"BTB_GYM_PLUGINS={stem})\n"
        ), err
        raised[given] = err.split(" failed: ")[1].split(":")[0]
    assert raised == {"./mine.py": "TypeError", "sub/mine": "ModuleNotFoundError"}


def test_a_plugin_that_takes_a_policy_s_name_is_refused(tmp_path, monkeypatch, capsys):
    """A plugin registering "btb" silently replaced btb in every table."""
    from baselines.btb import BTB
    from experiments import compare

    (tmp_path / "takes_btb.py").write_text(PLUGIN.replace("plugin_first_node", "btb"))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv(plugins.VARIABLE, "takes_btb")
    try:
        code = main_guard(lambda: compare.main(["policies=btb", f"out_dir={tmp_path / 'run'}"]))
    finally:
        sys.modules.pop("takes_btb", None)
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert (
        "BTB_GYM_PLUGINS=takes_btb: register('btb'): takes_btb.FirstNode: 'btb' is the name of "
        "baselines.btb.BTB already; choose another name" in err
    )
    assert POLICIES["btb"] is BTB  # put back


def _decides(body: str) -> type:
    namespace: dict[str, Any] = {"Policy": Policy}
    exec(f"class Mine(Policy):\n{body}", namespace)
    return namespace["Mine"]


@pytest.mark.parametrize(
    ("body", "taken"),
    [
        ("    def decide(self, sim, request):\n        return 0", True),
        ("    def decide(self, *args):\n        return 0", True),
        ("    def decide(self, sim, request, spare=None):\n        return 0", True),
        ("    @staticmethod\n    def decide(sim, request):\n        return 0", True),
        ("    def decide(self, request):\n        return 0", False),
        ("    def decide(self):\n        return 0", False),
        ("    def decide(self, sim, request, more):\n        return 0", False),
        ("    @staticmethod\n    def decide(request):\n        return 0", False),
    ],
)
def test_register_checks_decide_s_signature(body, taken):
    """A decide(self, request) registered, then failed with a raw TypeError at the
    first decision."""
    cls = _decides(body)
    try:
        if taken:
            assert register("plugin_signature")(cls) is cls and POLICIES["plugin_signature"] is cls
        else:
            with pytest.raises(RegistrationError) as caught:
                register("plugin_signature")(cls)
            assert str(caught.value).startswith("register('plugin_signature'): ")
            assert "cannot be called as decide(sim, request); a policy's is def decide(self, " in (
                str(caught.value)
            )
            assert "plugin_signature" not in POLICIES
    finally:
        POLICIES.pop("plugin_signature", None)


def test_a_plugin_with_decide_of_the_wrong_signature_is_one_line(plugin_module, capsys, tmp_path):
    from experiments import compare

    right, body = "def decide(self, sim, request):", "\n        return int"
    wrong = BUGGY.replace(right + body, "def decide(self, request):" + body)
    plugin_module("sig_routers", wrong)
    code = main_guard(lambda: compare.main(["policies=btb", f"out_dir={tmp_path / 'run'}"]))
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert err == (
        "error: experiments.compare: BTB_GYM_PLUGINS=sig_routers: register('buggy_decide'): "
        "sig_routers.BuggyDecide.decide(self, request) cannot be called as decide(sim, request); "
        "a policy's is def decide(self, sim, request)\n"
    )
    assert "buggy_decide" not in POLICIES and not (tmp_path / "run").exists()


def test_register_refuses_a_class_that_is_not_a_policy():
    """It was taken, and the run failed on an AttributeError ('NotAPolicy' object has
    no attribute 'run')."""

    class NotAPolicy:
        def decide(self, sim, request):
            return 0

    with pytest.raises(RegistrationError) as caught:
        register("plugin_not_a_policy")(NotAPolicy)  # type: ignore[arg-type]
    assert str(caught.value) == (
        "register('plugin_not_a_policy'): "
        f"{__name__}.test_register_refuses_a_class_that_is_not_a_policy.<locals>.NotAPolicy is "
        "not a subclass of baselines.policy.Policy (write class NotAPolicy(Policy) with "
        "decide(self, sim, request))"
    )
    assert "plugin_not_a_policy" not in POLICIES


def test_register_refuses_a_name_another_class_has_from_plain_python():
    """``register("btb")(Mine)`` silently replaced the built-in btb."""
    from baselines.btb import BTB

    mine = _decides("    def decide(self, sim, request):\n        return 0")
    with pytest.raises(RegistrationError, match=r"^register\('btb'\): .*'btb' is the name of "
                       r"baselines\.btb\.BTB already; choose another name$"):  # fmt: skip
        register("btb")(mine)
    assert POLICIES["btb"] is BTB and BTB.name == "btb" and mine.name == "policy"


DUPLICATE = """
from baselines.policy import Policy, register


@register("plugin_first")
class First(Policy):
    def decide(self, sim, request):
        return 0


@register("plugin_mine")
class A(Policy):
    def decide(self, sim, request):
        return 0


@register("plugin_mine")
class B(Policy):
    def decide(self, sim, request):
        return 1
"""


def test_two_classes_of_one_plugin_registering_one_name_are_refused(
    plugin_module, capsys, tmp_path
):
    """The second silently won; the plugin loader refused a name across modules only."""
    from experiments import compare

    plugin_module("dup_routers", DUPLICATE)
    code = main_guard(lambda: compare.main(["policies=btb", f"out_dir={tmp_path / 'run'}"]))
    err = capsys.readouterr().err
    assert code == 2 and err == (
        "error: experiments.compare: BTB_GYM_PLUGINS=dup_routers: register('plugin_mine'): "
        "dup_routers.B: 'plugin_mine' is the name of dup_routers.A already; choose another name\n"
    )
    assert not {"plugin_first", "plugin_mine"} & set(POLICIES)  # none of the module's


def test_a_plugin_module_reloaded_registers_its_classes_again(plugin_module):
    """The same class (module and name) registered again replaces itself."""
    plugin_module("reloaded_routers", PLUGIN)
    plugins.load_plugins()
    module = sys.modules["reloaded_routers"]
    first = POLICIES["plugin_first_node"]
    importlib.reload(module)
    assert POLICIES["plugin_first_node"] is module.FirstNode is not first


def test_overwrite_puts_the_earlier_run_back_when_a_policy_fails_mid_run(
    plugin_module, capsys, tmp_path
):
    """overwrite=true removed the earlier run's results as the run started: a run that
    then failed (here a policy's bug, found at its first decision) left the folder
    empty. The earlier run's files are kept aside and put back, byte for byte."""
    from experiments import compare

    plugin_module("buggy_routers", BUGGY)
    out = tmp_path / "run"
    base = ["windows=1", "progress=false", "agents=none", f"out_dir={out}"]
    assert main_guard(lambda: compare.main(["policies=least_load", *base])) == 0
    before = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in out.iterdir()}
    assert "results.json" in before and len(before) > 1  # with its charts
    capsys.readouterr()
    argv = ["policies=buggy_decide", "charts=false", "overwrite=true", *base]
    assert main_guard(lambda: compare.main(argv)) == 1
    assert "note:" not in capsys.readouterr().err
    assert {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in out.iterdir()} == before


def test_a_bug_in_a_plugin_s_constructor_is_not_called_a_bad_setting(
    plugin_module, capsys, tmp_path
):
    """A TypeError raised inside a policy's own __init__ was reported as a setting
    the policy does not take (one line, exit 2). A setting it does not take still is."""
    from experiments import compare

    plugin_module(
        "buggy_init",
        BUGGY.replace("class BuggyDecide(Policy):", "class BuggyDecide(Policy):\n"
                      "    def __init__(self, weight=1):\n"
                      "        self.weight = len(weight)\n"),
    )  # fmt: skip
    base = ["windows=1", "charts=false", "progress=false", f"out_dir={tmp_path / 'run'}"]
    code = main_guard(lambda: compare.main(["policies=buggy_decide", *base]))
    err = capsys.readouterr().err
    assert code == 1 and "Traceback (most recent call last):" in err
    assert "self.weight = len(weight)" in err
    assert err.endswith(
        "error: experiments.compare: policy 'buggy_decide' failed in __init__(): TypeError: "
        "object of type 'int' has no len()\n"
    )
    argv = ["policies=buggy_decide", "policy_kwargs=buggy_decide.mass=2", *base]
    assert main_guard(lambda: compare.main(argv)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'mass'" in err, err


def test_a_plugin_s_bare_setting_error_is_said_as_the_policy_s(plugin_module, capsys, tmp_path):
    """A plugin's constructor raising ``ConfigError.about("weight", ...)`` was said
    as ``weight must be >= 0`` without the policy, where the baselines write
    ``btb.x``: make_policy names it ``NAME.weight``. A field named with an owner
    already (the policy's own, or another object's) is said as written."""
    from envs.sim.checks import check_range
    from envs.sim.errors import ConfigError
    from experiments import compare

    @register("plugin_weighty")
    class Weighty(Policy):
        def __init__(self, weight: float = 1.0, field: str = "weight") -> None:
            if field == "checker":
                check_range("weight", weight, 0)
            elif weight < 0:
                raise ConfigError.about(field, f"must be >= 0, got {weight!r}")

        def decide(self, sim: Any, request: Any) -> int:
            return 0

    try:
        cases = [
            ("weight", "plugin_weighty.weight must be >= 0, got -1.0"),
            ("checker", "plugin_weighty.weight must be a number >= 0, got -1.0"),
            ("plugin_weighty.weight", "plugin_weighty.weight must be >= 0, got -1.0"),
            ("Mass.weight", "Mass.weight must be >= 0, got -1.0"),
        ]
        for field, said in cases:
            with pytest.raises(ConfigError) as refused:
                plugins.make_policy("plugin_weighty", weight=-1.0, field=field)
            assert str(refused.value) == said
            assert refused.value.fields == ("weight",)
        assert refused.value.named({"weight": "policy_kwargs=plugin_weighty.weight"}) == (
            "policy_kwargs=plugin_weighty.weight must be >= 0, got -1.0"
        )
    finally:
        POLICIES.pop("plugin_weighty", None)
    assert "plugin_weighty" not in POLICIES

    plugin_module(
        "weighty_routers",
        """
from baselines.policy import Policy, register
from envs.sim.errors import ConfigError


@register("plugin_weighty")
class Weighty(Policy):
    def __init__(self, weight: float = 1.0) -> None:
        if weight < 0:
            raise ConfigError.about("weight", f"must be >= 0, got {weight!r}")

    def decide(self, sim, request):
        return 0
""",
    )
    argv = ["policies=plugin_weighty", "policy_kwargs=plugin_weighty.weight=-1", "windows=1",
            "charts=false", "progress=false", f"out_dir={tmp_path / 'run'}"]  # fmt: skip
    assert main_guard(lambda: compare.main(argv)) == 2
    assert capsys.readouterr().err == (
        "error: experiments.compare: plugin_weighty.weight must be >= 0, got -1.0\n"
    )


def test_an_unknown_policy_says_where_a_policy_of_one_s_own_comes_from(plugin_module, monkeypatch):
    """A policy a script registered itself is unknown to the processes it starts by
    spawn (a SubprocVecEnv's workers): the worker said only ``reward_baseline must be
    a registered policy, got 'hitmax' (known: ...)``. Every refusal of a policy name
    now says where one comes from, or that the modules named register none of it."""
    import gymnasium as gym

    import envs
    from envs.sim.errors import ConfigError

    assert envs.ENV_IDS
    monkeypatch.delenv(plugins.VARIABLE, raising=False)
    hint = "(registered in another process? name its module in BTB_GYM_PLUGINS)"
    with pytest.raises(ValueError) as unknown:
        plugins.make_policy("hitmax")
    said = str(unknown.value)
    assert said.startswith("unknown policy 'hitmax'; known: btb, btb_eft, ")
    assert said.endswith(f", sglang {hint}") and "\n" not in said
    with pytest.raises(ConfigError) as refused:
        gym.make("btb/Route-v0", reward_baseline="hitmax")
    said = str(refused.value)
    assert said.startswith("reward_baseline must be a registered policy, got 'hitmax'; known: ")
    assert said.endswith(hint) and refused.value.fields == ("reward_baseline",)

    plugin_module("other_routers", PLUGIN)  # registers plugin_first_node, not hitmax
    with pytest.raises(ValueError) as unknown:
        plugins.make_policy("hitmax")
    assert str(unknown.value).endswith(
        ", plugin_first_node, random, round_robin, sglang "
        "(none of that name in BTB_GYM_PLUGINS=other_routers)"
    )


def test_a_policy_registered_in_the_parent_alone_is_unknown_to_a_spawned_process(tmp_path):
    """The case itself: a process started afresh (as spawn starts a worker) imports
    no module the parent imported; its refusal names BTB_GYM_PLUGINS."""
    import os
    import subprocess

    script = (
        "import gymnasium as gym, envs\n"
        "try:\n"
        "    gym.make('btb/Route-v0', reward_baseline='hitmax')\n"
        "except ValueError as error:\n"
        "    print(error)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != plugins.VARIABLE}
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    out = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
    ).stdout
    assert out.startswith("reward_baseline must be a registered policy, got 'hitmax'; known: ")
    assert out.endswith("(registered in another process? name its module in BTB_GYM_PLUGINS)\n")
