"""Keep a node spare for short prefills: the causal teacher's ``long_prefill_s`` rule.

Earliest-first-token routing is greedy for the request at hand. A request with a
long prefill of its own (on the burst families, a decoy's cold 65,536-token
prompt: 4.7 s on a 70b node) takes the node where its first token comes soonest,
often the last node not already busy with other long prefills; every short
request that arrives in the next seconds (a burst's requests, which hit a warm
prefix and need about 20 ms each) then queues behind it. On validation windows
that queueing is the largest share of oracle_warm's TTFT above the floor
(docs/results/teacher_diagnosis.md).

The rule weighs the two at each arrival, from the current estimates and the
recent past only:

* a request *holds* a node for the seconds from when the node gets to it until
  its first token there (its prefill, or its wait for a prefix on its way and
  then its suffix); it is *long* when that hold is at least ``long_s`` on the
  node the routing chose, else *short*;
* a long request is sent to the best other node instead when the short requests
  expected meanwhile would wait longer in total than it does:
  ``rate x blocked**2 / 2 > delay``, where ``rate`` is the short requests' recent
  arrival rate (:class:`envs.encoder.ShortArrivals`), ``blocked`` the seconds until a node is
  free for them if the request stays (the sooner of its own first token and the
  other nodes' backlogs), and ``delay`` how much later its first token comes on
  the other node. Short arrivals spread over ``blocked`` seconds wait
  ``blocked / 2`` each on average, hence the square.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from envs.sim.checks import is_number
from envs.sim.errors import echoed


def check_seconds(name: str, value: object) -> float:
    """``value`` as seconds > 0 (finite), or a ValueError naming ``name``."""
    if not is_number(value) or not 0 < value < float("inf"):  # type: ignore[operator]
        raise ValueError(f"{name} must be > 0 seconds (finite), got {echoed(value)}")
    return float(value)  # type: ignore[arg-type]


def spare_choice(
    choice: int,
    first_s: Sequence[float],
    hold_s: float,
    backlog_s: Sequence[float],
    candidates: Sequence[int],
    loads: Sequence[int],
    rate_per_s: float,
    long_s: float,
) -> int:
    """The node for a request the routing sent to ``choice``: ``choice`` itself,
    or, when the request is long there (``hold_s >= long_s``) and keeping it
    would make the short requests wait longer in total than moving it costs it,
    the best other node of ``candidates`` (the nodes up; earliest ``first_s``,
    ties by ``loads``, then index). ``first_s`` and ``backlog_s`` are seconds
    from now, per node; a NaN ``hold_s`` (an ``inf - inf``: no node eligible) is
    refused, as its comparisons would decide nothing."""
    if math.isnan(hold_s):
        raise ValueError("spare_choice: hold_s is NaN (no node eligible has no hold to weigh)")
    others = [i for i in candidates if i != choice]
    if hold_s < long_s or not others:
        return choice
    alt = min(others, key=lambda i: (first_s[i], loads[i], i))
    blocked = min(first_s[choice], min(backlog_s[i] for i in others))
    delay = first_s[alt] - first_s[choice]
    return alt if rate_per_s * blocked * blocked / 2 > delay else choice
