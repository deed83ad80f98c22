"""The request record lives in the world (:mod:`envs.sim.request`), which the
workloads build on; this name is kept for code that imports it from here."""

from envs.sim.request import BlockChainer, Request, Workload, validate_requests

__all__ = ["BlockChainer", "Request", "Workload", "validate_requests"]
