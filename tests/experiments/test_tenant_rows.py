"""Per-tenant TTFT in result rows and compare's table: the rows pool each tenant's
requests over the windows, and the table gets one line per policy and tenant."""

from __future__ import annotations

import numpy as np
import pytest

from envs.workloads.bursted import rows_to_workload
from envs.workloads.scenarios import MultiTenantConfig, multi_tenant_rows
from experiments.evaluation import evaluate_policies
from experiments.report import comparison_table

CONFIG = MultiTenantConfig(
    n_bursts=1, burst_requests=12, prefix_tokens=4096, n_decoys=2, burst_window_s=1.0, tenants=2
)


def _windows() -> list:
    return [
        rows_to_workload(multi_tenant_rows(CONFIG, w, seed=3), 256, name=f"tenant[{w}]")
        for w in range(2)
    ]


def test_rows_pool_each_tenants_requests_over_the_windows() -> None:
    windows = _windows()
    runs = evaluate_policies(["cache_aware", "btb"], "70b_h100x4", windows, workload="tenant")
    for run in runs:
        by_tenant = run.row["ttft_by_tenant"]
        assert sorted(by_tenant) == ["tenant-0", "tenant-1"]
        assert sum(t["requests"] for t in by_tenant.values()) == run.row["requests"] == 28
        for tenant, stats in by_tenant.items():
            ttft = np.concatenate([w.ttft_s[np.asarray(w.tenants) == tenant] for w in run.windows])
            assert stats["requests"] == ttft.size == 14
            assert stats["ttft_mean_s"] == pytest.approx(float(ttft.mean()), rel=1e-12)
            assert stats["ttft_p95_s"] == pytest.approx(float(np.percentile(ttft, 95)), rel=1e-12)
        weighted = sum(t["requests"] * t["ttft_mean_s"] for t in by_tenant.values()) / 28
        assert weighted == pytest.approx(run.row["ttft_mean_s"], rel=1e-12)
    table = comparison_table([run.row for run in runs], "cache_aware")
    tenant_lines = [line.split() for line in table.splitlines() if "tenant-" in line]
    assert [line[:3] for line in tenant_lines] == [
        ["cache_aware", "tenant-0", "14"],
        ["cache_aware", "tenant-1", "14"],
        ["btb", "tenant-0", "14"],
        ["btb", "tenant-1", "14"],
    ]


def test_one_tenant_rows_and_table_are_as_before() -> None:
    rows = [{**row, "tenant": ""} for row in multi_tenant_rows(CONFIG, 0, seed=3)]
    window = rows_to_workload(rows, 256, name="one")
    (run,) = evaluate_policies(["cache_aware"], "70b_h100x4", [window])
    assert "ttft_by_tenant" not in run.row
    assert "tenant" not in comparison_table([run.row], "cache_aware")
