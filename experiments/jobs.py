"""What the Hydra commands (train, evaluate, tune_btb) share: the job's folder,
the W&B group of a sweep, clean exits on user errors, and evaluating agents beside
baselines on test windows."""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import sys
import time
import traceback
import warnings
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from envs.files import write_bytes_atomic
from envs.sim.errors import ECHO_CHARS, SettingWarning, echoed, plural
from envs.sim.tenancy import Versions
from envs.workloads.trace_file import TRACE_WORKLOAD
from experiments import sweeps
from experiments._cli import (
    FROM_COMMAND_LINE,
    SAID_WARNINGS,
    UsageError,
    cap_note,
    error_line,
    input_paths,
    interruption,
    main_guard,
    name_running,
    running_command,
    show_warning,
    sim_note,
    stamp_trace,
    user_error_message,
    value_said,
)
from experiments._io import (
    LOCK_NAME,
    REPLACED_NAME,
    OutDirError,
    check_not_home_shorthand,
    check_writable_dir,
    claim_out_dir,
    claim_run_dir,
    folder_refusal,
    holds_out_dir,
    in_use,
    in_use_message,
    nearest_existing,
    release_out_dirs,
    remove_empty_dirs,
    replaced_message,
)
from experiments.config import (
    COMMAND_SCHEMAS,
    CONF_DIR,
    DEFAULT_RUN_PARENTS,
    PARAMS_ON_TRACE,
    bool_message,
    check_bool_values,
    check_known_keys,
    check_workload,
    claiming_run_folders,
    cluster_of,
    config_record,
    held_out_params,
    null_refusal,
    setup_label,
    sim_of,
    sweeper_param_origin,
    unknown_key_message,
    value_origin,
    window_pool_of,
    with_value_origin,
    workload_label,
    workload_params,
)
from experiments.evaluation import DEFAULT_BASELINE, evaluate_policies, no_requests
from experiments.report import comparison_table, write_run


def run_dir(cfg: Any, kind: str, outputs: Sequence[str]) -> Path:
    """The job's folder, created, checked writable and claimed (``_io.claim_out_dir``:
    locked against a second run; one holding anything but Hydra's own files is
    refused unless ``overwrite=true``, which replaces ``outputs``, what the job writes,
    and ``wandb/``, the W&B run of the results it replaces; they are kept aside until
    the job finishes, and put back if it ends before writing any, with the job's
    log):
    Hydra's output dir (out_dir, the multirun job folder, or the dated default, which
    ``config.run_folder`` claimed as Hydra named it); without Hydra, out_dir or a new
    dated runs/ folder. Released when the job ends (:func:`run_job`)."""
    from hydra.core.hydra_config import HydraConfig

    wandb = "wandb"  # the job logger's folder (experiments.tracking), started with the job

    what = f"experiments.{kind}: out_dir"
    inputs = input_paths(lambda option: OmegaConf.select(cfg, option, default=None))
    stamp_trace(str(cfg.workload.name), workload_params(cfg))  # the job's trace as it starts
    if not HydraConfig.initialized():
        stamp = time.strftime("%Y-%m-%d_%H-%M-%S")
        return claim_run_dir(
            cfg.out_dir,
            Path("runs") / kind / stamp,
            what,
            outputs,
            bool(cfg.overwrite),
            inputs,
            companions=(wandb,),
        )
    hydra = HydraConfig.get()
    folder = Path(hydra.runtime.output_dir)
    if cfg.out_dir not in (None, ""):  # (a config file's too: the command line's is checked)
        origin = value_origin("out_dir")
        check_not_home_shorthand(cfg.out_dir, f"{what}={cfg.out_dir!r}{origin}")
        if multirun() is not None:
            _check_one_folder(cfg.out_dir, origin, "hydra.sweep.dir", hydra.sweep.dir)
        else:
            _check_one_folder(cfg.out_dir, origin, "hydra.run.dir", hydra.run.dir)
    if not holds_out_dir(folder):  # (a dated folder was claimed as Hydra named it)
        log = f"{hydra.job.name}.log"  # (the job rewrites it: kept aside with the outputs)
        given = cfg.out_dir not in (None, "") and Path(cfg.out_dir).resolve() == folder.resolve()
        origin = value_origin("out_dir") if given else ""  # (not a sweep's job folder)
        claim_out_dir(
            folder,
            what,
            outputs,
            bool(cfg.overwrite),
            origin.removeprefix(" (from ").removesuffix(")"),
            ignore=(".hydra", log),
            inputs=inputs,
            companions=(log, wandb),
        )
    _JOB_LOG.start(folder / f"{hydra.job.name}.log")  # the folder is this job's now
    return folder


def _check_one_folder(out_dir: Any, origin: str, key: str, named: Any) -> None:
    """An ``out_dir`` (set where ``origin`` says) and a ``hydra.run.dir``
    (``hydra.sweep.dir`` in a sweep: ``key``) that name different folders are
    refused: Hydra's wins, so the run would write elsewhere than its ``out_dir``
    says, and its record would name the other."""
    if out_dir in (None, "") or named in (None, ""):
        return
    if Path(str(named)).resolve() != Path(str(out_dir)).resolve():
        raise UsageError(
            f"out_dir={str(out_dir)!r}{origin} and {key}={str(named)!r} name different "
            "run folders; give one of them (out_dir= is enough)"
        )


class _JobLog:
    """A Hydra job's printed lines (stdout, and stderr but progress bars), also in
    its folder's ``<command>.log`` (Hydra's job log, which holds only what goes
    through ``logging``, and the commands print): from the moment the job has
    claimed its folder (before, the log may be an earlier run's, which a refused
    run must not touch) to its end, with the job's error line if it fails. The
    log starts afresh, as the outputs it sits beside."""

    def __init__(self) -> None:
        self.file: Any = None
        self.stdout: Any = None
        self.stderr: Any = None

    def start(self, path: Path) -> None:
        self.stop()
        try:
            path.open("w").close()  # an earlier run's lines go, as its outputs went
            # appended to, as Hydra's own handler appends what goes through logging
            self.file = path.open("a", encoding="utf-8")
        except OSError:
            return  # the job runs on; only its log is missing
        for line in SAID_WARNINGS:  # said while it checked its config, before this
            self.write(line)
        self.stdout, self.stderr = sys.stdout, sys.stderr
        sys.stdout = _Tee(self.stdout, self.file)  # type: ignore[assignment]
        sys.stderr = _Tee(self.stderr, self.file, bars=False)  # type: ignore[assignment]

    def write(self, line: str) -> None:
        if self.file is not None:
            with contextlib.suppress(OSError, ValueError):
                self.file.write(line.rstrip("\n") + "\n")

    def stop(self) -> None:
        if self.stdout is not None and isinstance(sys.stdout, _Tee):
            sys.stdout = self.stdout
        if self.stderr is not None and isinstance(sys.stderr, _Tee):
            sys.stderr = self.stderr
        if self.file is not None:
            with contextlib.suppress(OSError, ValueError):
                self.file.close()
        self.file = self.stdout = self.stderr = None


class _Tee:
    """A text stream that writes to ``main`` and, as far as it can, ``copy``;
    without ``bars``, not what redraws a line (a progress bar's ``\r``)."""

    def __init__(self, main: Any, copy: Any, bars: bool = True) -> None:
        self.main, self.copy, self.bars = main, copy, bars
        self.in_bar = False  # the last text written redrew a line

    def write(self, text: str) -> int:
        bar = "\r" in text or (self.in_bar and text == "\n")  # a bar, or its closing newline
        self.in_bar = "\r" in text
        if self.bars or not bar:
            with contextlib.suppress(OSError, ValueError):
                self.copy.write(text)
        return int(self.main.write(text))

    def flush(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            self.copy.flush()
        self.main.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.main, name)


_JOB_LOG = _JobLog()


# Hydra flags that print something and exit without running a job (or making a folder).
_INFO_FLAGS = {"-h", "--help", "--hydra-help", "-c", "--cfg", "-i", "--info", "--shell-completion"}


def command_groups(command: str) -> list[str]:
    """The config groups a Hydra command takes: those its config's defaults list
    chooses (``conf/<name>.yaml``), and for ``train`` its ``+experiment=`` group."""
    name = command.removeprefix("experiments.")
    config = OmegaConf.to_container(OmegaConf.load(CONF_DIR / f"{name}.yaml"))
    defaults = config.get("defaults", []) if isinstance(config, dict) else []
    groups = [
        key.split("@")[0]
        for entry in defaults
        if isinstance(entry, dict)
        for key in entry
        if not key.startswith("override ")
    ]
    return [*groups, *(["experiment"] if name == "train" else [])]


@contextlib.contextmanager
def _help_lists_own_groups(command: str, hydra_groups: bool) -> Iterator[None]:
    """Hydra's ``--help`` lists every config group under ``conf/``; a command that
    does not take one refuses it (``tune_btb agent=ppo``): list only
    :func:`command_groups`, and Hydra's own only when ``hydra_groups`` (its
    ``--hydra-help`` and the like; ``--help`` prints none of them). The groups left
    out are not walked at all: Hydra copies its whole config repository for each
    group it looks into, so walking its own ~20 took 1.5 s of a 2.2 s ``--help``."""
    from hydra._internal.hydra import Hydra
    from hydra.core.object_type import ObjectType

    walked = {*command_groups(command), *(["hydra"] if hydra_groups else [])}
    every = Hydra.list_all_config_groups

    def listed(self: Hydra, parent: str = "") -> Sequence[str]:
        if parent:  # (a subgroup's listing: its top group was kept)
            return every(self, parent)
        found: list[str] = []
        for group in self.config_loader.list_groups(""):
            if group not in walked:
                continue
            if self.config_loader.get_group_options(group, ObjectType.CONFIG):
                found.append(group)
            if self.config_loader.get_group_options(group, ObjectType.GROUP):
                found.extend(every(self, group))
        return found

    Hydra.list_all_config_groups = listed  # type: ignore[method-assign]
    try:
        yield
    finally:
        Hydra.list_all_config_groups = every  # type: ignore[method-assign]


def hydra_entry(
    command: str,
    main: Callable[[], Any],
    argv: Sequence[str] | None = None,
    precheck: Callable[[list[str]], None] | None = None,
) -> int:
    """The ``__main__`` of a Hydra command. An ``out_dir=`` (or ``hydra.run.dir=``) on
    the command line is checked before Hydra starts (Hydra creates the folder first
    and would fail with a traceback; it writes its own files there, so a folder
    holding anything is refused here unless ``overwrite=true``), and so is anything
    ``precheck`` checks in the arguments; a default (dated) run folder is a new one,
    claimed as Hydra names it (``config.claiming_run_folders``); then user
    errors end the run as in ``main_guard``. ``--help``, ``--cfg`` and the like run
    no job, so they are passed to Hydra unchecked. Hydra reports an error of its own
    (an unknown group option, a value of the wrong type, a bad override) and exits
    with status 1; when that error is the user's (see :func:`_hydra_user_error`),
    the status becomes 2, as for every other user error. A sweep (``-m``) ends with
    its table and ``sweep.json`` (``experiments.sweeps``) and, if jobs failed, one
    line naming them: status 2, or 1 when one failed on a bug."""
    args = list(sys.argv[1:] if argv is None else argv)

    records: dict[Path, HydraRecord] = {}  # Hydra's files in the named folders, before

    def run() -> None:
        name_running(command)
        if not any(_is_info_flag(arg) for arg in args):
            _check_out_dir_not_swept(command, args)
            for key, value in _folder_overrides(args):
                _note_named(Path(value))
                check_writable_dir(value, f"{command}: {key}", "the command line")
                label = f"{command}: {key}={value!r}"
                # before Hydra writes its record over the running one's (a sweep's jobs
                # hold their own folders)
                if any(in_use(folder) for folder in _run_folders(Path(value))):
                    raise OutDirError(in_use_message(f"{label} (from the command line)"))
                _check_not_a_run(Path(value), label, args)
                records[Path(value)] = hydra_record(Path(value))
            _check_quoting(command, args)
            _check_given_once(args)
            given = {  # (an interpolation, ${out_dir}, is checked resolved: run_dir)
                o.key_or_group.lstrip("+~"): o.value()
                for o in _parsed_overrides(args)
                if not o.is_sweep_override() and not _interpolated(o.value())
            }
            key = "hydra.sweep.dir" if _is_sweep(args) else "hydra.run.dir"
            line = " (from the command line)"
            _check_one_folder(given.get("out_dir"), line, key, given.get(key))
            for override in _parsed_overrides(args):  # the setup chosen's record, not a choice
                if override.key_or_group.lstrip("+~") == "setup.name":
                    raise UsageError(
                        f"{command}: setup.name records the setup chosen; choose one with "
                        f"setup=NAME (got {echoed(override.input_line)} from the command line)"
                    )
            if precheck is not None:
                precheck(args)
        full_error = os.environ.get("HYDRA_FULL_ERROR") == "1"  # the user asked for tracebacks
        quiet = sweeps.quiet_job_errors() if _is_sweep(args) else contextlib.nullcontext()
        listing = (
            _help_lists_own_groups(command, hydra_groups=not set(args) & {"-h", "--help"})
            if any(_is_info_flag(arg) for arg in args)
            else contextlib.nullcontext()
        )

        def chosen(folder: Path) -> None:  # (an out_dir a config file sets, too)
            if folder not in records:  # (before Hydra makes it, or writes in it)
                # before Hydra writes its record over the running one's, as on the line
                if any(in_use(where) for where in _run_folders(folder)):
                    label = f"{command}: out_dir={str(folder)!r}{value_origin('out_dir')}"
                    raise OutDirError(in_use_message(label))
                _note_named(folder)
                records[folder] = hydra_record(folder)

        def named(summary: dict[str, Any] | None) -> bool:  # a rerun lands there again
            folder = None if summary is None else Path(summary["sweep_dir"]).resolve()
            return any(given.resolve() == folder for given in records)

        with _hydra_raises(), claiming_run_folders(command, chosen), quiet, listing:
            try:
                main()
            except SystemExit as stop:
                summary = sweeps.collect()  # before the restore, which looks at the jobs' work
                if stop.code not in (0, None):
                    restore_hydra_records(records)
                sweeps.finish(summary)
                if stop.code == 1 and _hydra_user_error(stop.__context__):
                    raise SystemExit(2) from None
                raise
            except BaseException as error:
                word = interruption(error) if isinstance(error, KeyboardInterrupt) else ""
                summary = sweeps.collect(interrupted=word)  # (Ctrl-C, SIGTERM, SIGHUP)
                restore_hydra_records(records)
                written = sweeps.finish(summary)
                if not isinstance(error, Exception):  # Ctrl-C
                    raise
                # the jobs' own errors: said already
                _end_sweep(command, summary, written, named(summary))
                refused = _folder_refusal(error)  # (raised by run_folder as OmegaConf resolved it)
                if refused is not None:
                    raise refused from None
                on_null = None if full_error else _override_on_null(command, error)
                if on_null is not None:  # (Hydra's own assertion, a traceback)
                    raise UsageError(on_null) from None
                if _is_hydra_error(error) and not full_error:  # does not compose: one line
                    # as the project's own checks say these (check_bool_values, check_known_keys)
                    where = _merged_origin(command, args, error)  # (a sweeper's params: not typed)
                    said = (
                        _bool_override(error, error.__cause__, where)
                        or _null_override(error, error.__cause__, where)
                        or _unknown_key(error, error.__cause__)
                        or _override_not_merged(command, error, where)
                    )
                    raise UsageError(said or f"{command}: {hydra_message(error)}") from None
                raise
            else:  # a sweeper that goes on past failed jobs (Optuna's max_failure_rate)
                summary = sweeps.collect()
                _end_sweep(command, summary, sweeps.finish(summary), named(summary))

    return main_guard(run)


def _end_sweep(
    command: str, summary: dict[str, Any] | None, written: Path | None, named: bool
) -> None:
    """End a sweep whose jobs failed on one line: status 2 when each failed on a
    user's error, 1 when one failed on a bug (its traceback printed as it ended);
    ``named``: the sweep's folder was named (:func:`sweeps.ending`)."""
    line, status = sweeps.ending(command, summary, written, named)
    if status == 2:
        raise UsageError(line)
    if status:
        print(f"error: {line}", file=sys.stderr)
        raise SystemExit(status)


HydraRecord = tuple[dict[Path, bytes], dict[Path, frozenset[tuple[str, int, int]]], frozenset[Path]]
"""A named folder's Hydra files as they were (:func:`hydra_files`), the work of
each run folder under it (:func:`_work`) and the job logs there (:func:`_logs`)."""


def hydra_files(folder: Path) -> dict[Path, bytes]:
    """What Hydra writes in a run or sweep folder before the job runs (``.hydra/``
    and ``multirun.yaml``, there and in each job folder, :func:`_run_folders`), as
    it is now."""
    found: dict[Path, bytes] = {}
    for base in _run_folders(folder):
        for path in [base / "multirun.yaml", *sorted((base / ".hydra").glob("*"))]:
            if path.is_file():
                found[path] = path.read_bytes()
    return found


def _run_folders(folder: Path) -> list[Path]:
    """``folder`` and, for a sweep, its job folders (``sweeps.job_folders``)."""
    return [folder, *sweeps.job_folders(folder)] if folder.is_dir() else []


def _work(folder: Path) -> frozenset[tuple[str, int, int]]:
    """Every file under ``folder`` (relative path, size, mtime) but Hydra's own
    (``.hydra/``, ``multirun.yaml``, a job's log) and a run's lock: what a job that
    ran there changed."""
    found = set()
    for path in folder.rglob("*"):
        rel = path.relative_to(folder)
        if ".hydra" in rel.parts or path.name in ("multirun.yaml", LOCK_NAME):
            continue
        if path.suffix == ".log" or not path.is_file():
            continue
        stat = path.stat()
        found.add((str(rel), stat.st_size, stat.st_mtime_ns))
    return frozenset(found)


def _logs(folder: Path) -> frozenset[Path]:
    """The job logs (``<command>.log``) in ``folder`` and its job folders."""
    return frozenset(log for base in _run_folders(folder) for log in base.glob("*.log"))


def _unchanged(base: Path, held: frozenset[tuple[str, int, int]]) -> bool:
    """Whether no job did any work in run folder ``base`` (:func:`_work` is ``held``)."""
    try:
        return _work(base) == held
    except OSError:
        return False


def hydra_record(folder: Path) -> HydraRecord:
    """:data:`HydraRecord` of a folder named on the command line, before Hydra runs."""
    return (
        hydra_files(folder),
        {base: _work(base) for base in _run_folders(folder)},
        _logs(folder),
    )


def restore_hydra_records(records: Mapping[Path, HydraRecord]) -> None:
    """After a run that failed or was refused: each Hydra file of a named folder
    that existed before it (:func:`hydra_files`) as it was, where no job of the run
    did any work (:func:`_work`: its run folder's files, the whole sweep's for a
    sweep's ``multirun.yaml``, are as they were), so an earlier run's record stays
    beside its results; a job that ran (or cleared its folder) keeps the record it
    ran with, whichever process ran it, and if it kept an earlier run's files aside
    (``_io.REPLACED_NAME``) that run's ``.hydra/`` goes beside them there. Files
    the run alone wrote (its Hydra files and job log) stay as the refused job's
    own record in a folder that held no results; beside an earlier run's results
    (another command's, which writes no Hydra files) they are removed, so that the
    folder describes only its results. A file that cannot be put back or removed
    is said in one line; the run's own error is what the command reports."""
    for before, work, logs in records.values():
        idle = {base: _unchanged(base, held) for base, held in work.items()}
        for path, data in before.items():
            owner = path.parent.parent if path.parent.name == ".hydra" else path.parent
            try:
                kept = owner / REPLACED_NAME  # an earlier run's files a job kept aside
                aside = kept / ".hydra" / path.name
                ours = not any(  # (a store there before the run is another run's)
                    rel.split(os.sep)[0] == REPLACED_NAME for rel, _, _ in work.get(owner, ())
                )
                if path.parent.name == ".hydra" and kept.is_dir() and ours and not aside.exists():
                    write_bytes_atomic(aside, data)  # (with them)
                if not idle.get(owner, False):
                    continue  # a job ran there: its record is its own
                if not path.is_file() or path.read_bytes() != data:
                    write_bytes_atomic(path, data)
            except OSError as error:
                print(f"warning: could not put back {path} ({error})", file=sys.stderr)
        for base, held in work.items():
            try:
                if not held or not idle[base]:
                    continue  # no results there, or a job ran there
                hydra = base / ".hydra"
                new = [p for p in sorted(hydra.glob("*")) if p.is_file() and p not in before]
                new += [p for p in sorted(base.glob("*.log")) if p not in logs]
                new += [p for p in [base / "multirun.yaml"] if p.is_file() and p not in before]
                for path in new:
                    path.unlink()
                with contextlib.suppress(OSError):
                    hydra.rmdir()  # only if nothing else is left in it
            except OSError as error:
                print(
                    f"warning: could not remove the refused run's files in {base} ({error})",
                    file=sys.stderr,
                )


class _hydra_raises:
    """While a Hydra command runs, Hydra raises its errors (HYDRA_FULL_ERROR=1) instead
    of printing them over several lines with a hint and exiting 1, so that ``run``
    reports them in one line. A user who set HYDRA_FULL_ERROR keeps Hydra's way."""

    def __enter__(self) -> None:
        self.before = os.environ.get("HYDRA_FULL_ERROR")
        self.owned = self.before is None
        if self.owned:
            os.environ["HYDRA_FULL_ERROR"] = "1"

    def __exit__(self, *exc: object) -> None:
        if self.owned:
            os.environ.pop("HYDRA_FULL_ERROR", None)


def _folder_refusal(error: BaseException) -> BaseException | None:
    """The run folder's refusal that the ``btb_dir`` resolver raised as OmegaConf
    resolved the folder (``_io.folder_refusal``), under the error OmegaConf (and
    Hydra) wrapped it in; None when ``error`` is no such one."""
    return folder_refusal(error) if _is_hydra_error(error) else None


def _is_hydra_error(error: BaseException) -> bool:
    """A composition error of Hydra's or OmegaConf's (not a job's own error)."""
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    return isinstance(error, (HydraException, OmegaConfBaseException))


_DETAIL_LINES = ("full_key:", "object_type=", "reference_type=")


def hydra_message(error: BaseException) -> str:
    """Hydra's (and its OmegaConf cause's) message on one line: ``Error merging
    override workload.window_s=abc: Value 'abc' of type 'str' could not be converted
    to Float``; a listing (``Available options in 'agent':`` and one name a line)
    becomes ``Available options in 'agent': a2c, dqn, ...``; Hydra's config search
    path is left out."""
    texts = [str(error)]
    cause = error.__cause__
    if cause is not None and str(cause) and str(cause) not in texts[0]:
        texts.append(str(cause))
    lines = []
    for text in texts:
        for raw in text.splitlines():
            line = raw.strip()
            if line.startswith("Config search path"):
                break
            if line and not line.startswith(_DETAIL_LINES):
                lines.append(line)
    out = ""
    listing = False
    for line in lines:
        if not out:
            out = line
        elif listing and not out.endswith(":"):
            out += ", " + line
        else:
            out += (" " if out.endswith((":", ".")) else ": ") + line
        if line.endswith(":"):
            listing = line.startswith("Available options")
    return out + _list_hint(cause)


def _bool_override(
    error: BaseException, cause: BaseException | None, where: str = FROM_COMMAND_LINE
) -> str | None:
    """``KEY must be true or false, got 'maybe' (from the command line)`` for a
    command-line override OmegaConf refused as no bool (``env.eft_rules=maybe``), as
    the project's own check (``check_bool_values``) says a ``yes``; None for any other
    error."""
    from omegaconf.errors import ValidationError

    if (
        not str(error).startswith("Error merging override ")
        or not isinstance(cause, ValidationError)
        or "is not a valid bool" not in str(cause)
        or not cause.full_key
    ):
        return None
    return bool_message(cause.full_key, cause.value, where)


def _null_override(
    error: BaseException, cause: BaseException | None, where: str = FROM_COMMAND_LINE
) -> str | None:
    """``model.name is null: give a model preset's name ... (from the command line)``
    for a command-line null OmegaConf refused (``field 'model.name' is not
    Optional``), as ``key=value`` commands say it (``config.null_refusal``); None for
    any other error."""
    from omegaconf.errors import ValidationError

    if (
        not str(error).startswith(_NOT_MERGED)
        or not isinstance(cause, ValidationError)
        or "is not Optional" not in str(cause)
        or not cause.full_key
    ):
        return None
    return null_refusal(cause.full_key) + where


_NOT_MERGED = "Error merging override "


def _override_not_merged(
    command: str, error: BaseException, where: str = FROM_COMMAND_LINE
) -> str | None:
    """``COMMAND: cluster.n_nodes='abc' (from the command line): Value 'abc' of type
    'str' could not be converted to Integer`` for a command-line override Hydra could
    not merge (``Error merging override cluster.n_nodes=abc: ...``), naming the value
    and where it came from as the project's checks do (``_cli.value_said``; a list
    option given one value keeps :func:`hydra_message`'s hint); None for any other
    error."""
    first = str(error).partition("\n")[0]
    if not first.startswith(_NOT_MERGED):
        return None
    override = first.removeprefix(_NOT_MERGED)
    key, _, text = override.partition("=")
    detail = hydra_message(error).removeprefix(first)
    if len(text) > ECHO_CHARS:  # OmegaConf says the value back whole ("Value '...' of type")
        detail = detail.replace(f"'{text}'", echoed(text))
    return f"{command}: {value_said(key.lstrip('+~'), text, where)}{detail}"


def _override_on_null(command: str, error: BaseException) -> str | None:
    """``COMMAND: hydra.sweeper.params.seed='abc' (from the command line): hydra.sweeper.params
    is null, so it has no key to set; ...`` for a command-line override of a key under
    a null node (Hydra's basic sweeper's ``params``), or of the null node with a dict,
    which OmegaConf fails on with an assertion or an ``AttributeError`` (Hydra 1.3 as
    well, without the project's checks) rather than an error of its own; None for any
    other error. The override is the one Hydra was applying
    (``_apply_overrides_to_config``)."""
    from omegaconf.errors import OmegaConfBaseException

    if isinstance(error, OmegaConfBaseException) or not isinstance(
        error, AssertionError | AttributeError
    ):
        return None
    override: Any = None
    cfg: Any = None
    trace = error.__traceback__
    while trace is not None:
        frame = trace.tb_frame
        if frame.f_code.co_name == "_apply_overrides_to_config" and "hydra" in (
            frame.f_globals.get("__name__") or ""
        ):
            override, cfg = frame.f_locals.get("override"), frame.f_locals.get("cfg")
        trace = trace.tb_next
    line = getattr(override, "input_line", None)
    if not line or not OmegaConf.is_config(cfg):
        return None
    key = str(override.key_or_group).lstrip("+~")
    parts = key.split(".")
    null = next(
        (
            ".".join(parts[:n])
            for n in range(1, len(parts) + 1)
            if OmegaConf.select(cfg, ".".join(parts[:n]), default=0) in (None, {})
        ),
        None,
    )
    if null is None:
        return None
    text = line.partition("=")[2]
    how = ""
    if null == "hydra.sweeper.params":  # the basic sweeper's: what its jobs are given
        leaf = key.removeprefix(null).lstrip(".") or "KEY"
        how = f"; sweep a key on the command line with {leaf}=A,B,..."
    return (
        f"{command}: {value_said(key, text, FROM_COMMAND_LINE)}: {null} is null, "
        f"so no key can be set in it from the command line{how}"
    )


def _merged_origin(command: str, args: Sequence[str], error: BaseException) -> str:
    """Where the override of Hydra's ``Error merging override KEY=...`` came from: the
    command line when it sets KEY (`` (from the command line)``), else the sweeper,
    which gives each job the values of its ``hydra.sweeper.params`` as overrides
    (:func:`experiments.config.sweeper_param_origin`: the file that sets it; the
    command's config is named after it, ``experiments.train``'s ``train``)."""
    first = str(error).partition("\n")[0]
    if not first.startswith(_NOT_MERGED):
        return FROM_COMMAND_LINE
    key = first.removeprefix(_NOT_MERGED).partition("=")[0].lstrip("+~")
    typed = {o.key_or_group.lstrip("+~") for o in _parsed_overrides(args)}
    if key in typed or not _is_sweep(args):
        return FROM_COMMAND_LINE
    return sweeper_param_origin(key, command.rpartition(".")[2], args)


def _unknown_key(error: BaseException, cause: BaseException | None) -> str | None:
    """``unknown key env.bogus (from the command line); env takes: ...`` for a
    command-line override of a key no schema has (``env.bogus=1``; Hydra would say to
    write ``+env.bogus=1``, which the project's own check refuses as unknown too);
    None for any other error."""
    from omegaconf.errors import ConfigAttributeError, ConfigKeyError

    schema = getattr(cause, "object_type", None)
    if (
        not str(error).startswith("Could not override ")
        or not isinstance(cause, ConfigAttributeError | ConfigKeyError)
        or not cause.full_key
    ):
        return None
    if not dataclasses.is_dataclass(schema):  # a free-form dict: what reads it knows its keys
        return _unknown_free_form_key(cause.full_key, cause.parent_node)
    known = [f.name for f in dataclasses.fields(schema)]
    return unknown_key_message(cause.full_key, known, " (from the command line)", schema)


def _unknown_free_form_key(path: str, parent: Any) -> str | None:
    """A key of a free-form dict of the config given without ``+``
    (``agent.hyperparams.n_step=64``, ``workload.params.n_burst=2``) that what reads the
    dict would refuse: the line ``+agent.hyperparams.n_step=64`` gets (``not a ppo
    hyperparameter; known: ...``; any key of a trace's, which takes none), where Hydra
    would say to add it with ``+``. None for a key the reader takes (Hydra's advice
    to write ``+`` is then the right one) and for any other dict."""
    group, _, leaf = path.rpartition(".")
    root = parent._get_root() if OmegaConf.is_config(parent) else None
    if root is None:
        return None
    origin = " (from the command line)"
    if group == "agent.hyperparams":
        from agents.algorithms import ALGORITHMS, hyperparameter_refusal

        algo = OmegaConf.select(root, "agent.algo")
        if algo not in ALGORITHMS:
            return None
        refused = hyperparameter_refusal(str(algo), leaf)
        return None if refused is None else refused + origin
    if group == "workload.params":
        from envs.sim.errors import ConfigError
        from envs.workloads.registry import configure, describe

        name = str(OmegaConf.select(root, "workload.name"))
        if name == TRACE_WORKLOAD:  # it takes none: + is refused too
            return f"{PARAMS_ON_TRACE} ({path} {FROM_COMMAND_LINE.lstrip(' (')}"
        try:
            families = describe(name).families
        except (ValueError, ImportError):  # a workload that is no workload
            return None
        if any(leaf in {f.name for f in dataclasses.fields(fam.config)} for fam in families):
            return None
        try:
            configure(name, **{leaf: None})
        except ConfigError as refused:  # unknown parameter(s) ...: configure's own words
            return refused.named({leaf: path}) + origin
    return None


def _list_hint(cause: BaseException | None) -> str:
    """For one value given to a list option (``checkpoint=PATH``, which OmegaConf
    refuses as ``str is not a ListConfig``): how to write it as a list."""
    from omegaconf.errors import ValidationError

    if not isinstance(cause, ValidationError) or "is not a ListConfig" not in str(cause):
        return ""
    key, value = cause.full_key, cause.value
    if not key or not isinstance(value, (str, int, float, bool)):
        return ""
    return f" ({key} is a list: write {key}=[{value}])"


def _check_not_a_run(folder: Path, label: str, args: Sequence[str]) -> None:
    """Before Hydra writes its files there: a folder named on the command line that
    holds anything is refused unless the command line says ``overwrite=true``
    (``_io.claim_out_dir`` then clears what the job writes)."""
    if (folder / REPLACED_NAME).exists():
        raise OutDirError(replaced_message(f"{label} (from the command line)"))
    if not folder.is_dir() or not any(folder.iterdir()) or _overwrite_given(args):
        return
    raise OutDirError(
        f"{label} (from the command line) already holds files; refusing to overwrite them "
        "(overwrite=true replaces what this command writes; or choose another out_dir)"
    )


def _overwrite_given(args: Sequence[str]) -> bool:
    """Whether the command line sets ``overwrite`` to true (as Hydra would read it)."""
    given = False
    for override in _parsed_overrides(args):
        if override.key_or_group.lstrip("+~") == "overwrite" and not override.is_sweep_override():
            given = override.value() in (True, "true", "True")
    return given


def sweep_overrides(args: Sequence[str]) -> list[Any] | None:
    """A ``-m`` command line's overrides, parsed by Hydra, for a check before the
    sweep starts; None for a single run, a line with other Hydra flags
    (``--config-name``, ...: the jobs check theirs) or one that does not parse
    (Hydra reports it better)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import OverrideParseException

    if not {"-m", "--multirun"} & set(args):  # (print-and-exit flags never get here)
        return None
    overrides = [a for a in args if not a.startswith("-")]
    if len(overrides) != len(args) - sum(a in ("-m", "--multirun") for a in args):
        return None
    try:
        return list(OverridesParser.create().parse_overrides(overrides))
    except OverrideParseException:
        return None


def _check_not_compare_setting(command: str, arg: str, key: str, value: str) -> None:
    """compare's ``policy_kwargs=btb.y_tokens=8192`` (or ``btb.x=3,btb.m=2``) given to
    a Hydra command, named with the command's own spelling: unquoted it does not
    parse as an override, and quoted (as the quoting hint would say) it is a string
    where settings go. A command that takes no policy settings (train, tune_btb) is
    told the key is unknown, as Hydra would say once the value is quoted."""
    if key.lstrip("+") != "policy_kwargs":
        return
    own = []
    for item in value.strip("'\"").split(","):
        target, equals, given = item.partition("=")
        policy, dot, name = target.partition(".")
        if not (equals and dot and policy and name):
            return
        own.append(f"+policy_kwargs.{target}={given}")
    schema = COMMAND_SCHEMAS.get(command)
    known = [] if schema is None else [f.name for f in dataclasses.fields(schema)]
    if known and "policy_kwargs" not in known:
        raise UsageError(
            f"{command}: {unknown_key_message('policy_kwargs', known, FROM_COMMAND_LINE, schema)}"
        )
    raise UsageError(
        f"{command}: {arg!r} is compare's spelling of policies' settings; this command "
        f"takes each setting as its own override: {' '.join(own)}"
    )


def _check_quoting(command: str, args: Sequence[str]) -> None:
    """An override that does not parse, named: one whose value is not quoted (blanks,
    brackets, commas, an ``=`` or a letter beyond ASCII in ``workload.path=/d/my trace
    (v2).jsonl``) with how to quote it, not the grammar's ``mismatched input ' ('``;
    a quoted one, a list or a dict with the grammar's own message after it."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    parser = OverridesParser.create()
    for arg in args:
        key, equals, value = arg.partition("=")
        if arg.startswith("-") or not equals:
            continue
        _check_not_compare_setting(command, arg, key, value)
        try:
            parser.parse_override(arg)
        except HydraException as error:
            if value[:1] in "'\"[{":  # quoted, or a list or dict: the grammar's message
                said = str(error).split("\n")[0].split(": See https://")[0]
                if len(said) > 80:  # the grammar's words quote the input again
                    said = said[:77] + "..."
                raise UsageError(
                    f"{command}: {echoed(arg)} does not parse as an override ({said})"
                ) from None
            quoted = value.replace("'", "\\'")  # the grammar's escape for a quote inside
            raise UsageError(
                f"{command}: {arg!r} does not parse as an override: quote a value with "
                f"blanks, brackets, commas, '=' or letters beyond ASCII, as "
                f"\"{key}='{quoted}'\" (Hydra's override grammar)"
            ) from None


def _check_given_once(args: Sequence[str]) -> None:
    """Say when a key is given twice on the command line (``sim=realistic
    sim=faults``): Hydra keeps the last, which would go unsaid. A warning, not a
    refusal: a script's defaults followed by the user's own is a use of it."""
    seen: dict[str, str] = {}
    for override in _parsed_overrides(args):
        key = override.key_or_group + (f"@{override.package}" if override.package else "")
        arg = override.input_line
        if key in seen:
            warnings.warn(
                f"{key}= is given twice ({seen[key]}, then {arg}): the last is used",
                SettingWarning,
                stacklevel=2,
            )
        seen[key] = arg


def _parsed_overrides(args: Sequence[str]) -> list[Any]:
    """The command line's overrides, read with Hydra's own parser (quotes, ``+``/``~``
    prefixes); flags and what does not parse (Hydra reports it) are left out."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    parser = OverridesParser.create()
    parsed = []
    for arg in args:
        if arg.startswith("-") or "=" not in arg:
            continue
        try:
            parsed.append(parser.parse_override(arg))
        except HydraException:  # OverrideParseException, or a bare one for some syntax errors
            continue
    return parsed


def _hydra_user_error(error: BaseException | None) -> bool:
    """Whether the exception Hydra has just reported (and exited 1 for) is the user's:
    a config that does not compose (unknown option, wrong type, bad override), or, in
    a multirun, a job's user error (``_cli.user_error_message``)."""
    from hydra.errors import CompactHydraException

    if isinstance(error, CompactHydraException):
        return True
    return error is not None and user_error_message(error) is not None


def _is_info_flag(arg: str) -> bool:
    """``--cfg``, ``--cfg=job``, ``-cjob``, ``-h`` and the like."""
    if arg.partition("=")[0] in _INFO_FLAGS:
        return True
    return arg in ("-cjob", "-chydra", "-call")  # not -cn / -cp / -cd (config name, path, dir)


def _check_out_dir_not_swept(command: str, args: Sequence[str]) -> None:
    """A sweep over ``out_dir`` (``-m out_dir=A,B``) is refused before Hydra starts:
    a sweep writes in one folder, each job in a numbered folder of it, so each
    job's ``out_dir`` named a folder other than its own and every job was refused,
    naming a ``hydra.sweep.dir`` the user never gave."""
    if not _is_sweep(args):
        return
    for override in _parsed_overrides(args):
        if override.key_or_group.lstrip("+~") == "out_dir" and override.is_sweep_override():
            raise UsageError(
                f"{command}: {override.input_line} (from the command line): out_dir cannot "
                "be swept; a sweep writes its jobs in one folder, each in a numbered folder "
                "of it (out_dir=DIR or hydra.sweep.dir=DIR: DIR/0, DIR/1, ...): give one "
                "folder, or run each out_dir as a run of its own"
            )


def _is_sweep(args: Sequence[str]) -> bool:
    """Whether the command line asks for a multirun (``-m``, ``--multirun``,
    ``hydra.mode=MULTIRUN``)."""
    return bool({"-m", "--multirun", "hydra.mode=MULTIRUN"} & set(args))


def _folder_overrides(args: Sequence[str]) -> list[tuple[str, str]]:
    """``(key, folder)`` for each ``out_dir=`` and ``hydra.run.dir=`` (with ``-m``,
    ``hydra.sweep.dir=``: the folder Hydra uses) on the command line,
    read with Hydra's own override parser (quotes, ``+``/``~`` prefixes); a sweep or
    an empty / null value names no one folder and is left out, and so is a value
    Hydra resolves (``hydra.run.dir=${out_dir}``), which names no folder yet: it is
    checked resolved once Hydra has composed the config (``run_dir``), as a config
    file's ``out_dir`` is."""
    found = []
    keys = ("out_dir", "hydra.sweep.dir" if _is_sweep(args) else "hydra.run.dir")
    for override in _parsed_overrides(args):
        key = override.key_or_group
        if key in keys and not override.is_sweep_override():
            value = override.value()
            if isinstance(value, str) and value and not _interpolated(value):
                found.append((key, value))
    return found


def _interpolated(value: Any) -> bool:
    """Whether a command line's value is one OmegaConf resolves (``${out_dir}``,
    ``runs/${now:%H-%M}``): its text is not yet what the run will see."""
    return isinstance(value, str) and "${" in value


def run_job(fn: Callable[[Any], float], cfg: Any) -> float:
    """Run one Hydra job. In a single run a user's error (``_cli.user_error_message``)
    ends the process with one line and status 2, as the key=value commands do; in a
    multirun it is raised, for Hydra to report against its job. Whatever ends the job
    (a bug and Ctrl-C too, which are raised on), its folder is released and, in a
    single run, removed if it holds nothing but Hydra's own files."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    from baselines.policy import load_plugins
    from experiments.provenance import start_run

    shown = warnings.showwarning  # one line each, once a run: a joblib worker's too
    warnings.showwarning = show_warning
    try:
        load_plugins()  # in the job's process, whichever launcher started it
        start_run()  # what made the run, as it starts (its result files record it)
        value = fn(cfg)
        release_out_dirs(finished=True)  # (the earlier run's files it replaced go)
        return value
    except BaseException as error:  # a bug or Ctrl-C too: no bare run folder is left
        release_out_dirs()
        multirun = HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN
        if HydraConfig.initialized() and not multirun:
            hydra = HydraConfig.get()
            _remove_bare_run_dir(
                Path(hydra.runtime.output_dir), f"{hydra.job.name}.log", list(hydra.overrides.task)
            )
        named = with_value_origin(error, cfg)  # says where a bad value came from
        message = user_error_message(named, running_command())
        if isinstance(error, Exception):
            if message is None:  # a bug: its traceback in the log too
                _JOB_LOG.write("".join(traceback.format_exception(named)))
            _JOB_LOG.write(f"error: {error_line(named)}")
        elif isinstance(error, KeyboardInterrupt):
            _JOB_LOG.write(interruption(error))
        _JOB_LOG.stop()  # before the message below, which the log has had
        if message is None or multirun:
            if named is error:
                raise
            raise named from error
        print(message, file=sys.stderr)
        raise SystemExit(2) from None
    finally:
        _JOB_LOG.stop()
        SAID_WARNINGS.clear()  # (the next job in this process starts with its own)
        warnings.showwarning = shown
        release_out_dirs()


# Folders named on the command line (out_dir=, hydra.run.dir=) that existed before
# the run: a rejected run never removes them.
_EXISTING_DIRS: set[Path] = set()
# Folders named on the command line that did not exist: the nearest one that did.
_MADE_BELOW: dict[Path, Path] = {}
_HYDRA_FILES = {"config.yaml", "hydra.yaml", "overrides.yaml"}


def _note_named(folder: Path) -> None:
    """Before Hydra makes it: a run folder named (``out_dir``, ``hydra.run.dir``) that
    exists is never removed by a refused run; for one that does not, the nearest
    folder that does is noted, and the folders Hydra makes on the way to it are
    removed with it, if empty (:func:`_remove_bare_run_dir`)."""
    if folder.exists():
        _EXISTING_DIRS.add(folder.resolve())
    else:
        _MADE_BELOW.setdefault(folder.resolve(), nearest_existing(folder).resolve())


def _remove_bare_run_dir(folder: Path, log_name: str, overrides: list[str]) -> None:
    """Remove the folder Hydra made for a run that was rejected, when it holds
    nothing but Hydra's own files (``.hydra/`` and the job log), was not there
    before the run, and its ``overrides.yaml`` is this run's (two runs started in
    the same second share a dated folder). Otherwise the folder is left as it is."""
    try:
        if folder.resolve() in _EXISTING_DIRS or not folder.is_dir():
            return
        top = {entry.name for entry in folder.iterdir()}
        meta = folder / ".hydra"
        if not top <= {".hydra", log_name}:
            return
        if meta.is_dir() and not {e.name for e in meta.iterdir()} <= _HYDRA_FILES:
            return
        recorded = meta / "overrides.yaml"
        if recorded.is_file() and list(OmegaConf.load(recorded)) != overrides:
            return  # another run's record
        for name in _HYDRA_FILES:
            (meta / name).unlink(missing_ok=True)
        if meta.is_dir():
            meta.rmdir()
        (folder / log_name).unlink(missing_ok=True)
        resolved = folder.resolve()  # a default folder: keep what existed above it
        keep = _MADE_BELOW.get(resolved, DEFAULT_RUN_PARENTS.get(resolved.parent))
        if keep is None:  # (in a new out_dir noted: hydra.run.dir=${out_dir}/run)
            made = [_MADE_BELOW[above] for above in resolved.parents if above in _MADE_BELOW]
            keep = made[0] if made else folder.parent
        remove_empty_dirs(folder, keep)
    except OSError:
        pass  # a folder we cannot tidy is left as it is


def check_world(cfg: Any, read_trace: bool = True) -> None:
    """Reject keys no schema has, and values the schema's types allow but no run can
    use (before any run); a trace file is read through unless not ``read_trace``
    (its options are checked all the same)."""
    check_known_keys(cfg)
    check_bool_values(cfg)
    for field, value in (("seed", cfg.seed), ("workload.seed", cfg.workload.seed)):
        if value < 0:
            raise ValueError(f"{field} must be >= 0 (a numpy seed), got {value}")
    from experiments.tracking import WANDB_MODES

    if cfg.logger.kind not in ("wandb", "none"):
        raise ValueError(f"logger.kind must be wandb or none, got {echoed(cfg.logger.kind)}")
    if cfg.logger.mode not in WANDB_MODES:
        from_env = OmegaConf.is_interpolation(cfg.logger, "mode") and "WANDB_MODE" in os.environ
        raise ValueError(
            f"logger.mode must be one of {', '.join(WANDB_MODES)}, got {echoed(cfg.logger.mode)}"
            + (" (from the environment variable WANDB_MODE)" if from_env else "")
        )
    for field in ("train_pool", "eval_windows", "val_windows"):
        value = cfg.workload[field]
        if value is not None and value < 1:
            raise ValueError(f"workload.{field} must be >= 1 or null (all), got {value}")
    # the groups that become the cluster, the simulator and the workload: a value
    # none can be made of is named by its config path, before any run
    cluster = cluster_of(cfg)
    if cfg.cluster.nodes is not None:  # every later read of the cluster's size, one place
        cfg.cluster.node, cfg.cluster.n_nodes = None, len(cluster.nodes)
    Versions.of(sim_of(cfg), len(cluster.nodes))  # sim.model_versions fit the cluster
    check_workload(cfg, read_trace)


def check_policy_names(names: Sequence[str], field: str) -> None:
    """Every baseline named in ``field`` (``policies``, ``train.eval_policies``) exists,
    and each once (a result file would list it twice, and it would run once)."""
    from baselines.policy import POLICIES, known_policies

    for i, name in enumerate(names):
        if name not in POLICIES:
            raise ValueError(f"{field}: unknown policy {echoed(name)}; {known_policies()}")
        if name in names[:i]:
            raise ValueError(f"{field} lists {echoed(name)} twice")


def agent_labels(names: Sequence[str], folders: Sequence[str]) -> list[str]:
    """A distinct result label for each agent: its name, or, for agents sharing a
    name, ``name@`` the fewest trailing components of its folder that tell the
    folders apart (``ppo_route@A/agent``); a folder given more than once adds
    ``#k`` (its k-th appearance) to that folder's labels only."""
    labels = list(names)
    for name in set(names):
        group = [i for i, n in enumerate(names) if n == name]
        if len(group) < 2:
            continue
        where = {i: Path(folders[i]).resolve().parts for i in group}
        distinct = sorted(set(where.values()))
        tail = {distinct[0]: ""}
        if len(distinct) > 1:  # distinct full paths: some depth tells them apart
            depth = next(
                d
                for d in range(1, max(len(p) for p in distinct) + 1)
                if len({p[-d:] for p in distinct}) == len(distinct)
            )
            tail = {p: "@" + "/".join(p[-depth:]) for p in distinct}
        given = Counter(where.values())
        seen: Counter[tuple[str, ...]] = Counter()
        for i in group:
            folder = where[i]
            labels[i] = name + tail[folder]
            if given[folder] > 1:
                seen[folder] += 1
                labels[i] += f"#{seen[folder]}"
    taken = [label for label in labels if labels.count(label) > 1]
    if taken:  # a suffixed label equal to another agent's own name
        labels = [f"{label}#{i + 1}" for i, label in enumerate(labels)]
    return labels


def job_logger(cfg: Any, out_dir: Path, kind: str) -> Any:
    """The job's :class:`~experiments.tracking.RunLogger` (W&B run or nothing),
    named ``setup__workload__KIND__seed__time`` like compare's run folders (and
    ``__jobN`` in a multirun) and grouped by the sweep folder in a multirun; its
    config records the run folder (``run_folder``), so a synced run leads back to
    its files. ``kind`` is the job type, with a suffix after ``-`` if wanted
    (``train-ppo_route``)."""
    from experiments.tracking import RunLogger

    return RunLogger(
        cfg.logger,
        {**config_record(cfg), "run_folder": str(out_dir)},
        out_dir,
        name=job_name(cfg, kind, time.strftime("%Y%m%d-%H%M%S"), sweep_job()),
        job_type=kind.split("-")[0],
        group=sweep_group(),
    )


def job_name(cfg: Any, kind: str, stamp: str, job: int | None = None) -> str:
    """``setup__workload__KIND__seed__STAMP``, and ``__jobN`` for job N of a sweep
    (whose jobs may start in the same second): a job's W&B run name."""
    name = f"{setup_label(cfg)}__{workload_label(cfg)}__{kind}__{cfg.seed}__{stamp}"
    return name if job is None else f"{name}__job{job}"


def sweep_job() -> int | None:
    """This job's number in a multirun (its folder's name there), else None."""
    hydra = multirun()
    return None if hydra is None else int(hydra.job.num)


def sweep_group() -> str | None:
    """The sweep folder's name in a multirun (the W&B group), else None."""
    hydra = multirun()
    return None if hydra is None else Path(hydra.sweep.dir).name


def multirun() -> Any:
    """Hydra's config of this job when it is a job of a multirun (``-m``), else None."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    if HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN:
        return HydraConfig.get()
    return None


def measured_on(
    cfg: Any, windows: Sequence[str], train: bool = False, **more: Any
) -> dict[str, Any]:
    """What a job's figure was measured on, for a sweep to tell whether its jobs'
    figures compare (``sweeps.note``'s ``basis``): the windows, the workload (its
    seed and parameters too), the setup and the simulator's settings, and
    ``more``. ``train``: the windows are train windows (``tune_btb``'s objective);
    else validation or test windows, which ``workload.params.train_streams`` does
    not draw (``registry.TRAIN_STREAMS``), so it is left out: jobs that differ in it
    alone (``train -m workload.params.train_streams=own,shared``) measured on the
    same windows."""
    sim = OmegaConf.to_container(cfg.sim, resolve=True)
    params = workload_params(cfg)
    if not train:
        params = held_out_params(params)
    return {
        "windows": list(windows),
        # the generator's seed and parameters (a trace's options) make the windows
        "workload": [str(cfg.workload.name), int(cfg.workload.seed), params],
        "setup": setup_label(cfg),
        "sim": sim,
        **more,
    }


def evaluation_header(cfg: Any, n_windows: int, split: str = "test", seed: str = "") -> str:
    """The line before an evaluation's table (``evaluate``'s, ``train``'s after
    training): setup, workload, how many ``split`` windows ran with
    ``workload.eval_windows``' :func:`cap_note`, the KV model (:func:`sim_note`, as
    ``compare``'s line says it) and the simulator's seed (``seed``, as ``key=value``;
    default ``seed=<cfg.seed>``)."""
    return (
        f"{setup_label(cfg)} · {workload_label(cfg, held_out=split != 'train')} · "
        f"{plural(n_windows, f'{split} window')}"
        + cap_note("workload.eval_windows", cfg.workload.eval_windows)
        + sim_note(sim_of(cfg))
        + f" · {seed or f'seed={cfg.seed}'}"
    )


def eval_windows(cfg: Any, limit: int | None, split: str = "test") -> list[Any]:
    """The workload group's held-out test windows (``limit`` of them; None: all), or
    another split's, checked before any run: a window with no requests (valid
    parameters can make one, for one seed; its statistics would be NaN) or with a
    request larger than a node's KV budget is refused, naming the window."""
    from envs.sim import SimulationError, Simulator

    windows = window_pool_of(cfg, split, limit)
    cluster, sim = cluster_of(cfg), sim_of(cfg)
    label = workload_label(cfg, held_out=split != "train")
    for window in windows:
        where = f"workload {label}: {split} window {window.name!r}"
        if not window.requests:
            raise no_requests(
                label,
                split,
                window.name,
                f"workload.seed={cfg.workload.seed}",
                "workload.params or workload.seed",
            )
        try:
            Simulator(cluster, window, sim)  # its constructor checks every request fits
        except SimulationError as error:
            raise ValueError(f"{where}: {error}") from None
    return windows


def evaluate_and_write(
    agents: dict[str, Any],
    baselines: list[str],
    cfg: Any,
    out_dir: Path,
    logger: Any,
    progress: bool,
    extra: dict[str, Any] | None = None,
    windows: list[Any] | None = None,
    split: str = "test",
    sim_seed: int | None = None,
    policy_kwargs: dict[str, dict[str, Any]] | None = None,
    timeline_window: int = 0,
) -> list[dict[str, Any]]:
    """Agents and baselines side by side on the test windows (or ``split``'s;
    ``windows``, if already made by :func:`eval_windows`), on the simulator stream
    of ``sim_seed`` (default: ``cfg.seed``), each baseline made with its
    ``policy_kwargs``, the timeline charts drawn from window ``timeline_window``
    (its position among them); writes results.json (with ``extra``'s keys beside ``rows``
    and ``config``; ``policy_settings``, the baselines' settings as they took them, when
    any are given) and charts."""
    from tqdm import tqdm

    from baselines.policy import make_policy

    if windows is None:
        windows = eval_windows(cfg, cfg.workload.eval_windows, split)
    names = list(dict.fromkeys([DEFAULT_BASELINE, *baselines]))
    settings = policy_kwargs or {}
    policies = {name: make_policy(name, **settings.get(name, {})) for name in names}
    for name, agent in agents.items():
        if name in policies:
            raise ValueError(f"agent name {name!r} clashes with a baseline's")
        policies[name] = agent
    with tqdm(
        total=len(windows) * len(policies), desc="evaluate", unit="run", disable=not progress
    ) as bar:
        runs = evaluate_policies(
            policies,
            cluster_of(cfg),
            windows,
            sim_of(cfg),
            seed=int(cfg.seed if sim_seed is None else sim_seed),
            workload=workload_label(cfg, held_out=split != "train"),
            progress=bar.update,
            setup_name=setup_label(cfg),
            floor=True,
            trace_window=timeline_window,
        )
    rows = [run.row for run in runs]
    result = {"rows": rows, "config": config_record(cfg), **(extra or {})}
    if settings:  # as the baselines took them (the config records them as typed)
        result["policy_settings"] = {name: dict(keys) for name, keys in settings.items()}
    written = write_run(out_dir, result, runs, DEFAULT_BASELINE)[1:]
    charts = [path for path in written if path.suffix == ".png"]
    print(comparison_table(rows, DEFAULT_BASELINE))
    logger.log_table("evaluation", rows)
    logger.log_images(charts)
    # each policy's figures as numbers too, so runs sort and plot by them
    logger.summary(
        {
            f"eval/{row['policy']}/{key}": row[key]
            for row in rows
            for key in ("ttft_mean_s", "ttft_p95_s")
            if isinstance(row.get(key), int | float) and math.isfinite(row[key])
        }
    )
    return rows
