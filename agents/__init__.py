"""Learned policies (stable-baselines3 / sb3-contrib + torch) behind the same
Policy interface as the baselines."""

from pathlib import Path

ZOO = Path(__file__).resolve().parent / "zoo"
"""The shipped agents' folders (``agents/zoo/<name>/agent.json``)."""


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
