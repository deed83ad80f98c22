"""Work spread over worker processes and stopped whole: what ``reproduce jobs=N``
and the improvement rounds' ``improvement.workers`` share. Standard library only.

A ``multiprocessing.Pool`` is not used: when a signal reaches the whole process
group (a terminal closing, a scheduler's SIGTERM), its idle workers die holding
the lock of its task queue, and the parent's ``terminate()`` then waits on that
lock for ever, holding its run folder's lock too. A ``ProcessPoolExecutor`` takes
a dead worker as an error (``BrokenProcessPool``) instead.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from multiprocessing.context import BaseContext
from typing import Any


def run_in_processes(
    fn: Callable[..., Any],
    calls: Iterable[tuple[Any, ...]],
    workers: int,
    *,
    initializer: Callable[[], None] | None = None,
    context: BaseContext | None = None,
    on_result: Callable[[Any], None] | None = None,
) -> list[Any]:
    """``[fn(*args) for args in calls]``, run on ``workers`` processes (made by
    ``context``, each starting with ``initializer``), in the order of ``calls``;
    ``on_result`` is called with each result as it is taken (a progress bar). Any
    error or interrupt in the parent (Ctrl-C; SIGTERM or SIGHUP, which the commands
    turn into one) ends the workers at once and cancels the rest, then goes on; a
    worker that dies is an error, never a hang."""
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=initializer)
    results = []
    try:
        futures = [pool.submit(fn, *args) for args in calls]
        for future in futures:
            results.append(future.result())
            if on_result is not None:
                on_result(results[-1])
    except BaseException:
        running = list((getattr(pool, "_processes", None) or {}).values())
        for process in running:  # (the executor's own)
            process.terminate()
        for process in running:  # gone before the executor's shutdown writes to
            process.join(timeout=5)  # them (a traceback at exit, now and then)
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown()
    return results
