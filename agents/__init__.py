"""Learned policies (stable-baselines3 / sb3-contrib + torch) behind the same
Policy interface as the baselines."""

from pathlib import Path

ZOO = Path(__file__).resolve().parent / "zoo"
"""The shipped agents' folders (``agents/zoo/<name>/agent.json``)."""

AGENT_FILES = ("agent.json", "model.zip")
"""What :func:`agents.algorithms.load_agent` reads in a checkpoint folder."""

FOLDERS_READ: dict[str, dict[str, str | None]] = {}
"""Each checkpoint folder ``load_agent`` read in this process (its resolved path),
with the sha256 of each of its :data:`AGENT_FILES` as read then, and of its
``run_state.pkl`` when a resume read that too (:func:`note_run_state`): a run's
provenance records them (``experiments.provenance``), which forgets them as a
command starts."""


def note_read(folder: str | Path) -> None:
    """Record in :data:`FOLDERS_READ` the checkpoint just read from ``folder`` (read
    again, the later read is kept: a training run reloads its own best agent)."""
    import hashlib

    where = Path(folder).resolve()
    digests: dict[str, str | None] = {}
    for name in AGENT_FILES:
        try:
            digests[name] = hashlib.sha256((where / name).read_bytes()).hexdigest()
        except OSError:  # gone since it was read
            digests[name] = None
    FOLDERS_READ.pop(str(where), None)  # the order of the reads
    FOLDERS_READ[str(where)] = digests


def forget_read(folder: str | Path) -> None:
    """Take ``folder`` out of :data:`FOLDERS_READ`: read, but left out of the run
    (``compare``'s ``agents=zoo`` leaving out a shipped agent that cannot run on the
    cluster), so a run's provenance does not list it among the agents it ran."""
    FOLDERS_READ.pop(str(Path(folder).resolve()), None)


def note_run_state(folder: str | Path, name: str, data: bytes) -> None:
    """Record in :data:`FOLDERS_READ`, beside the checkpoint files of ``folder``, the
    sha256 of its run state ``name`` (``run_state.pkl``) as read (``data``): a
    resumed run's provenance says which run state it read."""
    import hashlib

    where = str(Path(folder).resolve())
    FOLDERS_READ.setdefault(where, {})[name] = hashlib.sha256(data).hexdigest()


def zoo_names() -> list[str]:
    """The names of the agents shipped in agents/zoo/."""
    return sorted(p.parent.name for p in ZOO.glob("*/agent.json"))


def agent_folder(item: str) -> Path | None:
    """An agent checkpoint's folder: ``item`` itself if it holds ``agent.json``,
    else the shipped agent of that name (``improve_warm`` for
    ``agents/zoo/improve_warm``); None if neither."""
    folder = Path(item)
    if (folder / "agent.json").is_file():
        return folder
    if "/" not in item and (ZOO / item / "agent.json").is_file():
        return ZOO / item
    return None


class WorkerDied(RuntimeError):
    """A worker process of ``env.vec=subproc`` killed by a signal while training needed
    it (the kernel's out-of-memory killer, a ``kill``, a crash). Not a bug of the
    run's code and not bad input: the commands say it in one line, exit 2, as a full
    disk, with what the run kept (``agents.vec_env.WorkerVecEnv`` raises it;
    docs/agents.md)."""


class WorkerFailed(RuntimeError):
    """A worker process of ``env.vec=subproc`` that exited with a status while training
    needed it: its env raised (a bug of our code or of a plugin's), and the worker
    printed its traceback as it ended. A bug: the commands end with exit 1 and a
    last line naming the worker (the worker's traceback is above it;
    ``agents.vec_env.WorkerVecEnv`` raises it)."""
