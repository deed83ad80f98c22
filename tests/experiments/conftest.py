"""Commands run as ``python -m experiments.<name> ARGS`` would run them, in this
process: the module's ``__main__`` block (so the same entry code, the Hydra
commands' included), with ``sys.argv``, the working folder and the environment
set, and Hydra's process-wide state (its global config, the job's config, the
logging it sets up) put back afterwards. Starting a Python process costs seconds
(torch, SB3, Hydra imported again); the few tests that need a real process
(signals, a lock held by another process, libraries made unimportable) start one."""

from __future__ import annotations

import logging
import runpy
import sys
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest


@dataclass
class Finished:
    """What a command left: its exit status and what it printed."""

    returncode: int
    stdout: str
    stderr: str


RunCommand = Callable[..., Finished]


@pytest.fixture
def run_command(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> RunCommand:
    def run(
        command: str,
        args: Sequence[str],
        cwd: Path,
        env: Mapping[str, str] | None = None,
        unset: Sequence[str] = ("HYDRA_FULL_ERROR",),
    ) -> Finished:
        from hydra.core.global_hydra import GlobalHydra
        from hydra.core.hydra_config import HydraConfig

        with monkeypatch.context() as patch:
            patch.chdir(cwd)
            for name in unset:
                patch.delenv(name, raising=False)
            for name, value in (env or {}).items():
                patch.setenv(name, value)
            patch.setattr(sys, "argv", [command, *args])
            root = logging.getLogger()
            handlers, level = list(root.handlers), root.level
            capsys.readouterr()
            try:
                with warnings.catch_warnings():
                    # the module was imported by the tests already: it runs afresh as
                    # __main__ all the same, which is what ``python -m`` does
                    warnings.filterwarnings(
                        "ignore", "'experiments.", RuntimeWarning, module="runpy"
                    )
                    runpy.run_module(command, run_name="__main__", alter_sys=True)
                code = 0
            except SystemExit as stop:
                code = stop.code if isinstance(stop.code, int) else 1
            finally:
                GlobalHydra.instance().clear()
                HydraConfig.instance().cfg = None  # type: ignore[assignment]
                for handler in list(root.handlers):
                    if handler not in handlers:
                        root.removeHandler(handler)
                        handler.close()
                root.setLevel(level)
            out = capsys.readouterr()
        return Finished(code, out.out, out.err)

    return run
