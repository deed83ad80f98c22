"""BTB's X-in-Z window, shared by BTB and the causal teacher."""

from __future__ import annotations

from baselines.window import ArrivalWindow


def test_the_x_in_z_window_counts_arrivals_in_the_last_z_seconds() -> None:
    window = ArrivalWindow()
    assert [window.count(5, t, 1.0) for t in (0.0, 0.5, 1.6, 2.6)] == [1, 2, 1, 2]
    assert window.count(6, 2.6, 1.0) == 1  # keys are counted apart
    window.reset()
    assert window.count(5, 2.7, 1.0) == 1
