"""Warm copies of prefix KV between nodes, and the contention model's NIC sharing.

Under the reference model (the BTB write-up's) a copy becomes a work item on the
target's timeline once its source KV exists: it takes ``latency + bytes /
target RDMA bandwidth`` and the target does nothing else meanwhile. Under the
contention model copies run in the background; all copies moving at once share
every node's NIC (egress and ingress each at the node's RDMA bandwidth) by
max-min fairness, and each lands ``latency`` after its last byte. See
docs/physics.md, "Warm copies (RDMA)".
"""

from __future__ import annotations

WAIT_SOURCE = 0
QUEUED = 1
MOVING = 2
LANDED = 3


class Copy:
    """A warm copy of the prefix ``blocks`` from node ``src`` to node ``dst``."""

    __slots__ = (
        "blocks",
        "bytes",
        "dst",
        "id",
        "issued_s",
        "key",
        "land_s",
        "n_blocks",
        "rate",
        "remaining",
        "src",
        "start_s",
        "state",
    )

    def __init__(
        self,
        copy_id: int,
        src: int,
        dst: int,
        blocks: tuple[int, ...],
        n_blocks: int,
        n_bytes: float,
        now: float,
    ) -> None:
        self.id = copy_id
        self.src = src
        self.dst = dst
        self.blocks = blocks
        self.key = blocks[-1]
        self.n_blocks = n_blocks
        self.bytes = n_bytes
        self.issued_s = now
        self.start_s = -1.0
        self.land_s = -1.0
        self.state = WAIT_SOURCE
        self.remaining = n_bytes
        self.rate = 0.0

    @property
    def depth(self) -> int:
        return len(self.blocks)


def max_min_rates(flows: list[Copy], nic_bw: list[float]) -> None:
    """Set ``flow.rate`` for every active flow: max-min fair shares of each
    node's egress and ingress capacity (progressive filling)."""
    capacity: dict[tuple[int, int], float] = {}
    users: dict[tuple[int, int], list[Copy]] = {}
    for flow in flows:
        for res in ((0, flow.src), (1, flow.dst)):
            capacity.setdefault(res, nic_bw[res[1]])
            users.setdefault(res, []).append(flow)
    unfrozen = {id(f): f for f in flows}
    while unfrozen:
        best_share = float("inf")
        best_res: tuple[int, int] | None = None
        for res, flows_on in users.items():
            active = [f for f in flows_on if id(f) in unfrozen]
            if active:
                share = capacity[res] / len(active)
                if share < best_share:
                    best_share, best_res = share, res
        assert best_res is not None
        for flow in [f for f in users[best_res] if id(f) in unfrozen]:
            flow.rate = best_share
            del unfrozen[id(flow)]
            for res in ((0, flow.src), (1, flow.dst)):
                capacity[res] -= best_share
