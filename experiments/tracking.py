"""Experiment tracking: Weights & Biases (lazily imported) or nothing.

``logger.kind=wandb`` with ``logger.mode`` ``offline`` (default: the run lands in
``<run folder>/wandb`` for ``wandb sync``, and the job says where as it ends),
``online`` or ``disabled``. One W&B
run per Hydra job, grouped by the sweep's folder in a multirun. A run whose job
ends without finishing (an error, Ctrl-C, SIGTERM) having logged nothing holds no
more than its config: its files go, so a fresh run folder that got no results is
removed as it is without W&B; one that logged something is kept, and said, for
``wandb sync``.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from envs.sim.errors import echoed

WANDB_MODES = ("offline", "online", "disabled")


class TrackingError(ValueError):
    """W&B refused to start a run (a user's setting, reported in one line)."""


class RunLogger:
    """Logs metrics, tables and images; a no-op when tracking is off."""

    def __init__(
        self,
        logger_cfg: Any,
        config: dict[str, Any],
        out_dir: Path,
        name: str,
        job_type: str,
        group: str | None = None,
    ) -> None:
        self.run: Any = None
        self._step: int | None = None  # the step of a history row W&B holds open
        self.logged = False  # whether the run holds anything logged (its config aside)
        self._out_dir = Path(out_dir)
        self._made = False  # whether the run made <out_dir>/wandb
        self._mode = str(getattr(logger_cfg, "mode", ""))
        self.kind = logger_cfg.kind
        if self.kind not in ("wandb", "none"):
            raise ValueError(f"logger.kind must be wandb or none, got {echoed(self.kind)}")
        if self.kind == "none":
            return
        if logger_cfg.mode not in WANDB_MODES:
            raise ValueError(
                f"logger.mode must be one of {', '.join(WANDB_MODES)}, "
                f"got {echoed(logger_cfg.mode)}"
            )
        try:
            import wandb
        except ImportError:
            raise ImportError("logger=wandb needs the wandb package: pip install wandb") from None
        os.environ.setdefault("WANDB_SILENT", "true")
        folder = Path(out_dir) / "wandb"  # W&B's, made by init (an earlier one is set aside)
        made = self._made = not folder.exists()
        try:
            self.run = wandb.init(
                project=logger_cfg.project,
                entity=logger_cfg.entity,
                group=logger_cfg.group or group,
                tags=list(logger_cfg.tags),
                name=name,
                job_type=job_type,
                config=config,
                dir=str(out_dir),
                mode=logger_cfg.mode,
                reinit="finish_previous",
            )
        except wandb.errors.Error as error:  # no API key, no network, a wrong entity
            if made:  # its debug logs of a run that never started: the folder can go
                shutil.rmtree(folder, ignore_errors=True)
            reason = (str(error).strip().splitlines() or [type(error).__name__])[0]
            raise TrackingError(
                f"logger.mode={logger_cfg.mode}: W&B could not start the run ({reason}); "
                "use logger.mode=offline (upload later with `wandb sync`) or logger=none"
            ) from None
        except BaseException:  # Ctrl-C or SIGTERM as it starts: a run that logged nothing
            if made:
                shutil.rmtree(folder, ignore_errors=True)
            raise

    @property
    def folder(self) -> str | None:
        """Where the W&B run's files are (None when not tracking)."""
        return None if self.run is None else str(Path(self.run.dir).parent)

    def log(self, metrics: dict[str, Any], step: int | None = None) -> None:
        if self.run is not None:
            self.run.log(metrics, step=step)
            self._step = step
            self._filled()

    def _filled(self) -> None:
        """The run holds something logged: kept whatever ends the job (and, in an
        ``overwrite=true`` run, counted as written: ``_io.keep_companion``)."""
        if not self.logged:
            from experiments._io import keep_companion

            self.logged = True
            keep_companion(self._out_dir, "wandb")

    def _commit(self) -> None:
        """Write the history row W&B holds open (a row logged at an explicit step
        waits for a later step or the run's end, and then updates the summary with
        its values, over what :meth:`summary` set meanwhile)."""
        if self.run is not None and self._step is not None:
            self.run.log({}, step=self._step, commit=True)
            self._step = None

    def log_table(self, key: str, rows: Sequence[dict[str, Any]]) -> None:
        if self.run is None or not rows:
            return
        import wandb

        columns: list[str | int] = list(dict.fromkeys(k for row in rows for k in row))
        data = [[_plain(row.get(str(c))) for c in columns] for row in rows]
        self.run.log({key: wandb.Table(columns=columns, data=data)})
        self._filled()

    def log_images(self, paths: Sequence[Path]) -> None:
        if self.run is None:
            return
        import wandb

        self.run.log({f"charts/{Path(p).stem}": wandb.Image(str(p)) for p in paths})
        if paths:
            self._filled()

    def summary(self, values: dict[str, Any]) -> None:
        if self.run is not None:
            self._commit()
            for key, value in values.items():
                self.run.summary[key] = value
            if values:
                self._filled()

    def finish(self, error: BaseException | None = None) -> None:
        """End the W&B run (once; later calls do nothing): exit code 0, or, when
        ``error`` ended the job, the status the command exits with
        (``_cli.exit_status``: 130 for Ctrl-C, 143 for SIGTERM, 129 for SIGHUP, 1 for a
        failure, 2 for a user's error), so W&B records the run as failed. A run
        ended by ``error`` that logged nothing is then removed (its folder, and
        ``wandb/`` if it made it): it holds no more than the config, and a fresh
        run folder left holding it would be kept and block the next run there.
        One that logged something is kept, and an offline one is said in one
        line: what ``wandb sync`` uploads. A finished offline run is said so too
        (``W&B offline run: upload it with `wandb sync PATH```), the path quoted
        as a shell needs it (a folder with a space pastes as it is)."""
        if self.run is not None:
            from experiments._cli import exit_status

            run, self.run = self.run, None
            own = Path(run.dir).parent  # offline-run-<time>-<id>/
            run.finish(exit_code=0 if error is None else exit_status(error))
            if error is None:
                if self._mode == "offline":  # nothing else says where it is
                    print(f"W&B offline run: upload it with `wandb sync {shlex.quote(str(own))}`")
                return
            if not self.logged:
                folder = self._out_dir / "wandb"
                shutil.rmtree(folder if self._made else own, ignore_errors=True)
            elif self._mode == "offline":
                print(
                    f"note: this run did not finish; its W&B offline run {own} holds what "
                    f"it logged and is kept (upload it with `wandb sync {shlex.quote(str(own))}`)",
                    file=sys.stderr,
                )


def _plain(value: Any) -> Any:
    if isinstance(value, (dict, list, tuple)):
        return str(value)
    return value
