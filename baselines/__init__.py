"""Hand-written policies behind one small interface (``baselines.policy.Policy``)."""

from baselines.btb import BTB, ShadowCopy
from baselines.btb_pending import BTBPending
from baselines.btb_speculative import BTBSpeculative
from baselines.btb_tuned import BTBTuned
from baselines.eft_pull import EarliestFirstTokenPull
from baselines.eft_pull_spread import EarliestFirstTokenPullSpread
from baselines.oracle import OracleWarm
from baselines.policy import POLICIES, Policy, make_policy, register
from baselines.production import LLMD, DynamoKV, SGLangGateway
from baselines.routers import (
    CacheAware,
    LeastLoad,
    RandomRouter,
    RoundRobin,
    cache_aware_choice,
    least_loaded,
    pick,
)

__all__ = [
    "BTB",
    "LLMD",
    "POLICIES",
    "BTBPending",
    "BTBSpeculative",
    "BTBTuned",
    "CacheAware",
    "DynamoKV",
    "EarliestFirstTokenPull",
    "EarliestFirstTokenPullSpread",
    "LeastLoad",
    "OracleWarm",
    "Policy",
    "RandomRouter",
    "RoundRobin",
    "SGLangGateway",
    "ShadowCopy",
    "cache_aware_choice",
    "least_loaded",
    "make_policy",
    "pick",
    "register",
]
