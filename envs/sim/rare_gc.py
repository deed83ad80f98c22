"""The cyclic garbage collector's rare threshold while simulator runs are active.

A run builds tens of thousands of objects the cyclic collector tracks (the
caches' segments, their block lists and child maps, the per-request records), and
a collection at the default threshold would scan them again and again. While any
run, environment or command holds the stretch, the generation-0 threshold is
:data:`RUN_GC_THRESHOLD`; the caller's setting comes back when the last one lets
go. Every result is the same either way; only the time spent collecting differs
(``docs/benchmarks.md``).
"""

from __future__ import annotations

import gc
import weakref

RUN_GC_THRESHOLD = 200_000
"""The cyclic GC's generation-0 threshold while a run is active: a
``conversation_like`` window (12,000 requests) leaves about 90,000 tracked objects
(mostly the caches' segments and their block lists), so it runs with no
collection at all; a collection every 50,000 cost 8-20 % of its time. It bounds
the cyclic garbage a long run can hold to that many objects."""


class RareGC:
    """Raises the cyclic GC's generation-0 threshold (:data:`RUN_GC_THRESHOLD`)
    while any run is active and restores the caller's setting when the last one
    ends (runs may overlap, e.g. in vectorised environments)."""

    def __init__(self) -> None:
        self.active = 0
        self.saved: tuple[int, ...] = ()
        self._get = gc.get_threshold
        self._set = gc.set_threshold  # kept: module globals may be gone at exit

    def enter(self) -> None:
        if self.active == 0:
            self.saved = self._get()
            self._set(max(self.saved[0], RUN_GC_THRESHOLD), *self.saved[1:])
        self.active += 1

    def leave(self) -> None:
        self.active -= 1
        if self.active == 0:
            self._set(*self.saved)

    def __enter__(self) -> RareGC:
        # ``with RARE_GC:`` binds the object as it enters, so its exit needs no
        # module global (they may be gone when a run is closed at interpreter exit)
        self.enter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.leave()


RARE_GC = RareGC()
"""The process's one stretch: simulator runs (``with RARE_GC:``), environments
and the commands (:func:`hold`) enter it."""


def hold(owner: object) -> weakref.finalize:
    """Enter the rare-collection stretch that runs use (:data:`RUN_GC_THRESHOLD`)
    and hold it until the returned handle is called (once; later calls do
    nothing) or ``owner`` is collected, whichever comes first. An environment
    holds one across its episodes: otherwise the caller's threshold comes back
    at the end of every episode's run and the next allocation starts a
    collection over everything the run left (15 % of the time of
    ``btb/Thresholds-v0`` stepped episode after episode, its episodes being short).
    The caller's threshold, as it was when the first stretch began, comes back
    when the last one ends (a ``gc.set_threshold`` made meanwhile is undone)."""
    RARE_GC.enter()
    return weakref.finalize(owner, RARE_GC.leave)
