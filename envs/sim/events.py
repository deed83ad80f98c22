"""The kinds of the simulator's events, one number each, in one place.

The simulator's heap holds ``(time, order, kind, object, version)``; its loop
dispatches on ``kind``. A module that schedules events imports its kind here, so
no two features can pick the same number.
"""

from __future__ import annotations

WAKE_EVENT = 0
"""A node's work item ends (``envs.sim.simulator``); void unless ``version`` is the node's."""
FLOW_EVENT = 1
"""The next copy flow finishes under the contention copy model (``envs.sim.transfers``)."""
LAND_EVENT = 2
"""A warm copy lands on its target (``envs.sim.transfers``)."""
FAULT_EVENT = 3
"""A node is lost or comes back, or a NIC goes down or up (``envs.sim.faults``)."""
UPGRADE_EVENT = 4
"""A node starts its rolling upgrade (``envs.sim.tenancy``)."""
LIFE_EVENT = 5
"""A demotion or promotion ends, or a warm copy's TTL is due (``envs.sim.lifecycle``)."""
