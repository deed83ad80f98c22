"""Hand-written policies behind one small interface (``baselines.policy.Policy``)."""

from baselines.btb import BTB
from baselines.policy import POLICIES, Policy, make_policy, register
from baselines.routers import CacheAware, LeastLoad, RandomRouter, RoundRobin, least_loaded

__all__ = [
    "BTB",
    "POLICIES",
    "CacheAware",
    "LeastLoad",
    "Policy",
    "RandomRouter",
    "RoundRobin",
    "least_loaded",
    "make_policy",
    "register",
]
