"""A reward of your own: a ``gymnasium.Wrapper`` around ``btb/Route-v0``.

The environment credits each request's TTFT (``-ttft_s / reward_scale``) in
the step in which its first token comes out. ``SloReward`` replaces that with
an SLO count: +1 for every request whose first token came out within
``slo_s`` of its arrival, -1 for every one that took longer, so an episode's
return is (requests on time) - (requests late). It reads what happened since
the last step from the simulator behind the environment
(``env.unwrapped.sim``): ``first_token_log`` lists the requests in the order
their first tokens came out, ``records.first_token_s`` holds the times.

    python examples/reward_wrapper.py

The episode is driven by cache_aware acting through the env
(``policy_action``); pass generator parameters to :func:`main` for a smaller
window, e.g. ``main(n_bursts=2, burst_requests=50, n_decoys=10)``.
"""

from __future__ import annotations

from typing import Any, SupportsFloat

import gymnasium as gym

import envs  # noqa: F401  (registers btb/*)
from baselines import make_policy


class SloReward(gym.Wrapper):  # type: ignore[type-arg]
    """+1 for each request served within ``slo_s`` seconds of TTFT, -1 for each one over."""

    def __init__(self, env: gym.Env, slo_s: float = 1.0) -> None:  # type: ignore[type-arg]
        super().__init__(env)
        if not slo_s > 0:
            raise ValueError(f"slo_s must be > 0, got {slo_s!r}")
        self.slo_s = slo_s
        self._seen = 0

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        self._seen = 0
        return self.env.reset(**kwargs)

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, _, terminated, truncated, info = self.env.step(action)
        sim = self.env.unwrapped.sim  # type: ignore[attr-defined]
        first_token_s = sim.records.first_token_s
        on_time = late = 0
        for request in sim.first_token_log[self._seen :]:
            if first_token_s[request.index] - request.arrival_s <= self.slo_s:
                on_time += 1
            else:
                late += 1
        self._seen = len(sim.first_token_log)
        info = {**info, "slo_on_time": on_time, "slo_late": late}
        return obs, float(on_time - late), terminated, truncated, info


def main(slo_s: float = 1.0, **workload_params: Any) -> dict[str, float]:
    """One episode of ``btb/Route-v0`` (the first train window) under ``SloReward``,
    cache_aware choosing the actions; print and return the return and the counts."""
    env = SloReward(
        gym.make(
            "btb/Route-v0",
            setup="70b_h100x4",
            workload="bursted_synthetic",
            n_windows=1,
            workload_params=workload_params or None,
        ),
        slo_s=slo_s,
    )
    policy = make_policy("cache_aware")
    env.reset(seed=0, options={"window": 0})
    policy.reset(env.unwrapped.sim)  # type: ignore[attr-defined]
    episode_return, on_time, late = 0.0, 0, 0
    terminated = truncated = False
    while not (terminated or truncated):
        action = env.unwrapped.policy_action(policy)  # type: ignore[attr-defined]
        _, reward, terminated, truncated, info = env.step(action)
        episode_return += float(reward)
        on_time += info["slo_on_time"]
        late += info["slo_late"]
    env.close()
    print(
        f"SLO {slo_s:g} s: {on_time} requests on time, {late} late, "
        f"episode return {episode_return:+.0f}"
    )
    return {"return": episode_return, "on_time": on_time, "late": late}


if __name__ == "__main__":
    main()
