"""Workloads: the request record, trace readers and synthetic generators.

Entry points:

- :func:`windows` / :func:`list_workloads`: named, seeded workloads
  (``bursted_synthetic`` by default) as one :class:`Workload` per window.
- :func:`read_trace` / :func:`iter_trace_windows`: Mooncake, ART-Chat,
  Bursted-ART and Qwen-Bailian files (Bursted-ART streamed window by window);
  :func:`read_hub_dataset` for datasets read through the ``datasets`` library.
- :func:`audit_workload` / :func:`audit_windows`: busiest arrival windows and
  same-prefix fan-out.
"""

from envs.sim.request import BlockChainer, Request, Workload, validate_requests
from envs.workloads.art_like import ArtLikeConfig, art_like_window_rows
from envs.workloads.bursted import (
    PUBLISHED_SEED,
    BurstedSyntheticConfig,
    rows_to_workload,
    synthetic_window,
    synthetic_window_rows,
)
from envs.workloads.readers import (
    MissingDependencyError,
    ReadOptions,
    ReadReport,
    TraceFormatError,
    TraceWarning,
    UnsortedTraceError,
    iter_bursted_windows,
    iter_trace_windows,
    read_art_chat,
    read_hub_dataset,
    read_mooncake,
    read_qwen_bailian,
    read_trace,
)
from envs.workloads.registry import (
    DEFAULT_WORKLOAD,
    PUBLISHED_WORKLOAD,
    WindowSpec,
    configure,
    list_workloads,
    plan,
    window_rows,
    windows,
)
from envs.workloads.stats import audit_windows, audit_workload

__all__ = [
    "DEFAULT_WORKLOAD",
    "PUBLISHED_SEED",
    "PUBLISHED_WORKLOAD",
    "ArtLikeConfig",
    "BlockChainer",
    "BurstedSyntheticConfig",
    "MissingDependencyError",
    "ReadOptions",
    "ReadReport",
    "Request",
    "TraceFormatError",
    "TraceWarning",
    "UnsortedTraceError",
    "WindowSpec",
    "Workload",
    "art_like_window_rows",
    "audit_windows",
    "audit_workload",
    "configure",
    "iter_bursted_windows",
    "iter_trace_windows",
    "list_workloads",
    "plan",
    "read_art_chat",
    "read_hub_dataset",
    "read_mooncake",
    "read_qwen_bailian",
    "read_trace",
    "rows_to_workload",
    "synthetic_window",
    "synthetic_window_rows",
    "validate_requests",
    "window_rows",
    "windows",
]
