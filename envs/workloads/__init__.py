"""Workloads: the request record, trace readers and synthetic generators."""

from envs.workloads.request import BlockChainer, Request, Workload, validate_requests

__all__ = ["BlockChainer", "Request", "Workload", "validate_requests"]
