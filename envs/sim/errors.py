"""Errors raised by the simulator for bad configuration or impossible requests."""

from __future__ import annotations


class ConfigError(ValueError):
    """A setting that cannot be simulated; the message names the field and value.

    ``fields`` lists every field the message is about when it is more than one
    (``tail_penalty needs slo_s``), so a caller that renames fields to config
    paths renames each of them, not only the first."""

    def __init__(self, message: str, fields: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.fields = tuple(fields)


class SimulationError(RuntimeError):
    """A workload that cannot run on the configured cluster (e.g. a request too big)."""
