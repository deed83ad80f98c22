"""Errors raised by the simulator for bad configuration or impossible requests."""

from __future__ import annotations


class ConfigError(ValueError):
    """A setting that cannot be simulated; the message names the field and value."""


class SimulationError(RuntimeError):
    """A workload that cannot run on the configured cluster (e.g. a request too big)."""
