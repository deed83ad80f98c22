"""Speed work on the encoder, the forecast and the masks keeps every observation,
mask and reward identical to the bit: a hash of all of them over seeded random
episodes, recorded before that work, must not move. The environments run the
process's encoder (the compiled node rows when built); the Python reference
rows must give the same hashes.

Run this file as a script (``python tests/envs/test_observation_fingerprint.py``)
to print the current hashes."""

from __future__ import annotations

import hashlib
import struct
from typing import Any

import gymnasium as gym
import pytest

import envs
import envs.encoder
from envs.workloads.bursted import BurstedSyntheticConfig, synthetic_window

assert envs.ENV_IDS  # registers the environments

# bursts large enough for long queues, copies in flight and waits for a source
BUSY = BurstedSyntheticConfig(
    n_bursts=3,
    burst_requests=60,
    prefix_tokens=8192,
    first_burst_s=6.0,
    burst_interval_s=6.0,
    burst_window_s=6.0,
    n_decoys=10,
)

CASES: dict[str, tuple[str, dict[str, Any]]] = {
    "route": ("btb/Route-v0", {}),
    "route_hints": ("btb/Route-v0", {"hints": True}),
    "route_warm": ("btb/RouteWarm-v0", {}),
    "route_warm_options": (
        "btb/RouteWarm-v0",
        {"hints": True, "speculate": True, "cache_actions": True},
    ),
    "route_warm_view_delay": ("btb/RouteWarm-v0", {"sim": {"router_view_delay_s": 0.5}}),
}

RECORDED = {
    "route": "14f3c550b0098599b87cda03e625c264b63ca6771dcdb659fe66e8f7d7301cde",
    # 2026-12-06: with hints, the shipped generators' (source, job kind) pairs have
    # columns of their own (bursts and decoys shared crc32 % 8 = 4; a deliberate change)
    "route_hints": "fe88756e00c25b71cd0819258cef3c5559d201a63aa047c9d7d97a7dd1fad45c",
    # 2026-12-05: a copy whose source or target lost its KV before it landed lands
    # nothing (a deliberate change; the random warm actions of these three cases
    # make such copies); 2026-12-06: the node rows count a copy in flight from when
    # it lands, being written or queued on its target (a deliberate change, these
    # three cases)
    "route_warm": "b6f712f3aeebe9ed8a58b1390d9671e89961af366cb351e17761e3146ef984ea",
    # 2026-12-03: a request taking its prefix from a promotion pays the promoted
    # tokens' HBM read (a deliberate change; this case promotes); 2026-12-05 as above;
    # later on 2026-12-05: evicting a prefix a node holds only pinned is masked (an
    # eviction leaves pinned blocks, so it moved nothing and was refused); 2026-12-06:
    # the hint columns, as route_hints
    "route_warm_options": "dee239c33ad03d9edfe64fa0460cd5084096c057e5b762f25322db2f85140b13",
    "route_warm_view_delay": "56fdc4cafcdd7da067ab8000a1ff420f6e9b7de2727934483abadbced0e30cdb",
}
"""The hashes of :func:`fingerprint`, recorded on main before the speed work (#19)."""


def fingerprint(env_id: str, kwargs: dict[str, Any]) -> str:
    """sha256 of every observation, action mask and reward of one seeded random
    episode on each of two windows."""
    windows = [synthetic_window(BUSY, window=w) for w in (0, 1)]
    env = gym.make(env_id, windows=windows, **kwargs).unwrapped
    digest = hashlib.sha256()
    masked = hasattr(env, "action_masks")
    for w in range(len(windows)):
        env.action_space.seed(w)
        obs, _ = env.reset(seed=w, options={"window": w})
        digest.update(obs.tobytes())
        done = False
        while not done:
            if masked:
                digest.update(env.action_masks().tobytes())
            obs, reward, done, _, _ = env.step(env.action_space.sample())
            digest.update(obs.tobytes())
            digest.update(struct.pack("<d", reward))
    env.close()
    return digest.hexdigest()


@pytest.mark.parametrize("case", sorted(CASES))
def test_observations_masks_and_rewards_are_unchanged(case: str) -> None:
    env_id, kwargs = CASES[case]
    assert fingerprint(env_id, kwargs) == RECORDED[case]


@pytest.mark.parametrize("case", ["route_warm", "route_warm_options"])
def test_the_reference_rows_give_the_same_hashes(
    case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(envs.encoder, "NATIVE", None)  # encoders built now run the Python rows
    env_id, kwargs = CASES[case]
    assert fingerprint(env_id, kwargs) == RECORDED[case]


if __name__ == "__main__":
    for name, (env_id, kwargs) in CASES.items():
        print(f'    "{name}": "{fingerprint(env_id, kwargs)}",')
