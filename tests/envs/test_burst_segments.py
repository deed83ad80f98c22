"""A curriculum's episodes: windows cut into burst segments
(``envs.windows.burst_segments``) and an env told to draw from them
(``ClusterEnv.set_windows``)."""

from __future__ import annotations

import pickle

import pytest

from envs.route import RouteEnv
from envs.sim.request import Request, Workload
from envs.windows import burst_segments, burst_starts


def _window() -> Workload:
    """Two bursts of 3 requests (groups a at 10 s, b at 20 s), a 2-request group c
    at 15 s and two requests with no group, at 1 s and 25 s."""
    arrivals = [
        (1.0, ""), (10.0, "a"), (10.5, "a"), (11.0, "a"), (15.0, "c"), (15.5, "c"),
        (20.0, "b"), (21.0, "b"), (22.0, "b"), (25.0, ""),
    ]  # fmt: skip
    requests = [
        Request(i, f"r{i}", t, 512, 1, (100 * i + 1, 100 * i + 2), "", group, "", "")
        for i, (t, group) in enumerate(arrivals)
    ]
    return Workload("w", 256, requests, {"generator": "hand"})


def test_bursts_are_groups_of_at_least_min_requests() -> None:
    assert burst_starts(_window(), min_requests=3) == [10.0, 20.0]
    assert burst_starts(_window(), min_requests=2) == [10.0, 15.0, 20.0]
    assert burst_starts(_window(), min_requests=4) == []


def test_segments_by_hand() -> None:
    """lead 2 s: segments start at 8 and 18 s. One burst each: [8, 18) holds the
    requests at 10, 10.5, 11, 15, 15.5 (shifted by -8: 2, 2.5, 3, 7, 7.5);
    [18, end) those at 20, 21, 22, 25 (2, 3, 4, 7). Two bursts: [8, end) and
    [18, end). The request at 1 s is in none (before the first segment)."""
    one = burst_segments(_window(), bursts=1, lead_s=2.0, min_requests=3)
    assert [[r.arrival_s for r in s.requests] for s in one] == [
        [2.0, 2.5, 3.0, 7.0, 7.5],
        [2.0, 3.0, 4.0, 7.0],
    ]
    assert [s.requests[0].request_id for s in one] == ["r1", "r6"]
    assert [r.index for r in one[1].requests] == [0, 1, 2, 3]  # renumbered
    assert one[0].meta == {"generator": "hand", "segment_of": "w", "segment_s": [8.0, 18.0]}
    assert one[0].name == "w@8.0s" and one[0].block_tokens == 256
    two = burst_segments(_window(), bursts=2, lead_s=2.0, min_requests=3)
    assert [len(s) for s in two] == [9, 4]
    assert burst_segments(_window(), bursts=1, lead_s=2.0, min_requests=4) == []
    # both starts clipped to 0 s: the first segment, [0, 0), is empty and left out
    (late,) = burst_segments(_window(), bursts=1, lead_s=30.0, min_requests=3)
    assert late.meta["segment_s"] == [0.0, float("inf")] and len(late) == 10
    with pytest.raises(ValueError, match="lead_s must be a finite number >= 0"):
        burst_segments(_window(), bursts=1, lead_s=-1.0)
    with pytest.raises(ValueError, match="bursts"):
        burst_segments(_window(), bursts=0)


def test_set_windows_changes_later_episodes_and_a_copy_replays_the_current_one() -> None:
    whole = _window()
    segments = burst_segments(whole, bursts=1, lead_s=2.0, min_requests=3)
    env = RouteEnv(setup="70b_h100x4", windows=[whole], seed=0)
    env.reset(seed=0)
    env.step(0)
    env.set_windows(segments)  # mid-episode: this episode stays on the whole window
    copy = pickle.loads(pickle.dumps(env))
    assert copy.sim is not None and len(copy.sim.workload.requests) == len(whole)
    assert copy.windows == segments
    assert copy.step(0)[4]["window"] == 0  # still the pool's window 0, as reset said
    steps = 1
    done = False
    while not done:
        _, _, done, _, info = env.step(0)
        assert info["window"] == 0
        steps += 1
    assert steps == len(whole)  # one decision a request
    env.reset()
    assert env.sim is not None and len(env.sim.workload.requests) in {len(s) for s in segments}
    with pytest.raises(ValueError, match="windows is empty"):
        env.set_windows([])


def test_set_windows_takes_one_workload_as_the_constructor_does() -> None:
    whole = _window()
    (first, second) = burst_segments(whole, bursts=1, lead_s=2.0, min_requests=3)
    env = RouteEnv(setup="70b_h100x4", windows=first, seed=0)
    assert env.windows == [first]
    env.set_windows(second)
    assert env.windows == [second]
    env.reset(seed=0)
    assert env.sim is not None and env.sim.workload is second
    assert pickle.loads(pickle.dumps(env)).windows == [second]
    for bad, shown in ((5, "int"), ("w", "str")):
        with pytest.raises(
            ValueError,
            match=f"^set_windows: windows must be a Workload or a list of them, got {shown}$",
        ):
            env.set_windows(bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^set_windows: windows\[1\] must be a Workload, got str"):
        env.set_windows([first, "w"])  # type: ignore[list-item]
    assert env.windows == [second]


def test_a_curriculum_trains_on_segments_first_then_whole_windows() -> None:
    """PPO on one Route-v0 env of one two-burst window: until step 64 every step
    is of a segment (the env restarted on them at the start, though SB3 had
    reset it on the whole window), and after the switch the whole window comes
    back at the env's next episode."""
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.vec_env import DummyVecEnv

    from agents.algorithms import quiet
    from agents.callbacks import Curriculum
    from envs.workloads.bursted import BurstedSyntheticConfig, synthetic_window

    config = BurstedSyntheticConfig(n_bursts=2, burst_requests=20, n_decoys=2, burst_window_s=4.0)
    whole = synthetic_window(config, window=0)
    segments = burst_segments(whole, bursts=1, min_requests=10)
    assert len(segments) == 2

    class Seen(BaseCallback):
        def __init__(self) -> None:
            super().__init__()
            self.names: list[tuple[int, str]] = []

        def _on_step(self) -> bool:
            sim = self.training_env.envs[0].unwrapped.sim  # type: ignore[attr-defined]
            self.names.append((self.num_timesteps, sim.workload.name))
            return True

    vec = DummyVecEnv([lambda: RouteEnv(setup="70b_h100x4", windows=[whole])])
    model = quiet(PPO("MlpPolicy", vec, n_steps=32, batch_size=32, n_epochs=1, seed=0))
    seen, curriculum = Seen(), Curriculum([(64, segments)], [whole], echo=False)
    model.learn(192, callback=[curriculum, seen])
    assert curriculum.changes == [(0, 0), (64, 1)]
    before = {name for step, name in seen.names if step <= 64}
    assert before and all("@" in name for name in before)  # segments only
    assert whole.name in {name for step, name in seen.names if step > 64}
