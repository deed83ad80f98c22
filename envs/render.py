"""Rendering for the Gymnasium environments: a text table and a timeline picture.

Imported lazily by ``render()``, so matplotlib is only loaded when asked for.
"""

from __future__ import annotations

import numpy as np

from envs.sim.request import Request
from envs.sim.simulator import Simulator


def render_ansi(sim: Simulator, request: Request | None) -> str:
    """The cluster now: per node its load, KV use, copies in flight and this request's hit."""
    lines = [
        f"t = {sim.now:10.3f} s   requests served {len(sim.first_token_log)}/{len(sim.requests)}"
    ]
    if request is not None:
        lines.append(
            f"arriving {request.request_id}: {request.input_tokens} tokens, "
            f"{len(request.blocks)} blocks, {request.output_tokens} out"
        )
    lines.append(f"{'node':>4} {'load':>6} {'queue':>6} {'KV used':>8} {'in flight':>9} {'hit':>6}")
    for node in sim.nodes:
        hit = node.view.hbm_match(request.blocks) / len(request.blocks) if request else 0.0
        lines.append(
            f"{node.index:>4} {node.load:>6} {len(node.queue):>6} "
            f"{node.reserved_tokens / node.budget_tokens:>8.1%} {len(node.inflight):>9} {hit:>6.1%}"
        )
    return "\n".join(lines) + "\n"


def render_rgb(sim: Simulator, history: list[tuple[float, list[int]]]) -> np.ndarray:
    """Per-node load over the episode so far, with warm copies marked where they land.

    Drawn on a figure of its own (matplotlib's object API with the Agg canvas), so
    neither the caller's matplotlib backend nor pyplot's open figures change."""
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.4, 3.2), dpi=80)
    canvas = FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    if history:
        times = np.array([t for t, _ in history])
        loads = np.array([row for _, row in history])
        for k in range(loads.shape[1]):
            ax.step(times, loads[:, k], where="post", label=f"node {k}", linewidth=1)
    colors = matplotlib.rcParams["axes.prop_cycle"].by_key()["color"]
    for copy in sim.copies:
        if copy.land_s >= 0:
            ax.axvline(copy.land_s, color=colors[copy.dst % len(colors)], linestyle=":", alpha=0.7)
    ax.set_xlabel("simulated time (s)")
    ax.set_ylabel("running + waiting")
    ax.set_title("load per node (dotted: warm copies landing)", fontsize=9)
    if history:
        ax.legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    canvas.draw()
    return np.asarray(canvas.buffer_rgba())[..., :3].copy()
