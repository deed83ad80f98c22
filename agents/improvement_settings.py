"""Rollout policy improvement settings: a plain dataclass (no torch import), so the
Hydra schema (``experiments.config``, group ``improvement``) can use it directly."""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, fields

from envs.sim.errors import SettingWarning, echoed

AGREEING = ("label", "start")
"""The values of ``improvement.agreeing``."""


@dataclass
class ImprovementSettings:
    """Rollout policy improvement (:mod:`agents.rollout_improvement`) settings
    (``iterations=0``, the default, switches it off)."""

    iterations: int = 0
    """Rounds of (measure every node at sampled decisions, fit the policy to the best)."""
    windows: int = 8
    """Train windows per round (at most the pool; the pool in turn, continuing round to round)."""
    states_per_window: int = 24
    """Long decisions measured per window (fewer when the window has fewer)."""
    lead_requests: int | None = None
    """Requests replayed before a measured decision; None (the default): the whole
    past, so the decision is measured in the very state the agent met. A shorter
    lead is cheaper but rebuilds the state only approximately: on ``mixed``, whose
    background traffic keeps cache state for minutes, 600 requests were too few
    (labels that saved TTFT on the cut window cost it on the whole one)."""
    horizon_requests: int = 300
    """Requests from the measured decision on whose TTFTs are summed."""
    min_gain_s: float = 0.5
    """Summed TTFT (s) another node must save over the policy's own to replace it."""
    hold_s: float = 0.25
    """A decision is *long* (measured) when the request would hold the node the
    policy chose at least this long (first token less backlog there, s)."""
    anchor_per_window: int = 1500
    """The policy's own decisions per window kept as labels, so that fitting the
    measured ones does not move the rest."""
    repeat: int = 4
    """Copies of each measured decision among the labels (its weight)."""
    agreeing: str = "label"
    """How the fit treats a label the policy already chooses (its greedy action,
    every component) as the round finds it: ``label`` (the default), cross-entropy
    to the label like any other; ``start``, the KL divergence from the policy as
    the round found it to the fitted one, so that the fit is pulled back towards
    the whole distribution there, not only its choice, and only the labels that
    differ pull the policy away. Tried because cross-entropy to a choice already
    made sharpens it, which might move the decisions no label covers; measured
    (docs/results/warm_rising.md, ``agree``, ``ownagree``) it does not hold
    ``mixed`` better. Adam normalises each step, so even where every label agrees
    (a gradient of rounding size) the weights move by about the learning rate a
    step."""
    warm_anchor_repeat: int = 0
    """Copies among the labels of every decision of the policy's own trajectory
    that warms at least one node, in each window whose anchors come from that
    trajectory (the warm variant did not win it; anchored windows included); 0
    (the default): none beyond the random anchors. On the burst families the
    policy warms at 5-15 of a window's 4,120 arrivals, the random anchors keep a
    third of them, and a fit to the warm variant's labels elsewhere unlearns the
    rest: measured on 70b's 1 s bursts, the fitted policy made 0 copies where its
    start made 21, and was 11.5 % slower for it (its routes alone: 0.6 %)."""
    families_in_turn: bool = True
    """Each round's windows one per family in turn (else the pool in a seeded order)."""
    families: list[str] | None = None
    """The families whose train windows are measured (a window ``.../NAME-0007`` is of
    family ``NAME``); None (the default): every family of the pool. Validation still
    scores every family, so a family left out is watched, not fitted."""
    anchor_families: list[str] | None = None
    """Families whose train windows join the rounds for anchors only: their
    ``anchor_per_window`` own decisions are kept as labels and none is measured, so
    the fit holds the policy there (with ``warm_variant`` the variant is tried on
    them too, and where it wins their anchors are its own); None (the default): no
    such family. Disjoint from ``families``."""
    pool_seeds: list[int] | None = None
    """More workload seeds whose train windows join the rounds' pool (the run's own
    ``workload.seed``'s always do): ``workload.train_pool`` windows of each, drawn as
    the run's own are (``workload.params``), named ``WORKLOAD@seedS/family-0007`` and
    kept to ``families`` and ``anchor_families`` as the run's own are; None (the
    default): none. A registered workload's other seed draws other windows from
    other random streams, so the rounds see more of a family's traffic than its
    ``train_windows`` (changing those would shuffle other windows to test).
    Validation still scores the run's own seed's validation windows."""
    warm_variant: bool = False
    """Serve each round's windows a second time with the agent warming the arriving
    prefix onto every node the action mask allows (see ``warm_calm_s``); where that
    lowers the window's summed TTFT by at least ``warm_variant_gain``, the window's
    anchors come from that trajectory and its measured decisions' labels warm every
    allowed node. Copies pay off over minutes (a later turn of the same
    conversation), which one measured decision with a 300-request horizon does not
    see."""
    warm_variant_families: list[str] | None = None
    """The families whose windows the warm variant is tried on (the others keep the
    agent's own trajectory, as without ``warm_variant``); None (the default): every
    window of the rounds. A fit reaches every family's states, not only those whose
    windows gave its labels: in ``improve_warm_anchored``'s three runs of 2026-12-07
    with the variant tried on every family but the 1 s bursts, ``mixed``'s
    validation windows came out 5-22 % slower in every round while
    ``rising_load``'s gained 4.9-5.9 % (docs/results/warm_rising.md)."""
    warm_variant_gain: float = 0.01
    """The share of a window's summed TTFT the warm variant must save (0.01: 1 %;
    0: wherever it is not slower), in [0, 1)."""
    warm_calm_s: float | None = None
    """The warm variant warms only at arrivals where no node has this many seconds of
    work ahead (its ``backlog``); None (the default): at every arrival. The labels of
    a winning window's measured decisions warm everywhere either way."""
    undo_worse: bool = True
    """Undo a round's fit unless it lowers the geometric mean of the round's own
    windows' summed TTFTs (measured: every fit of the runs that set this was undone)."""
    aggregate: bool = True
    """Fit each round to every round's labels so far (else to its own only)."""
    workers: int = 1
    """Processes measuring windows at once (forked; the labels do not depend on it)."""
    epochs: int = 5
    batch_size: int = 256
    learning_rate: float = 3e-4

    def __post_init__(self) -> None:
        """Counts and numbers in range, each named as its config key."""
        for name, low in (
            ("iterations", 0),
            ("windows", 1),
            ("states_per_window", 1),
            ("horizon_requests", 1),
            ("anchor_per_window", 0),
            ("repeat", 1),
            ("warm_anchor_repeat", 0),
            ("workers", 1),
            ("epochs", 1),
            ("batch_size", 1),
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(
                    f"improvement.{name} must be a whole number >= {low}, got {echoed(value)}"
                )
        for name in ("aggregate", "families_in_turn", "undo_worse", "warm_variant"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(
                    f"improvement.{name} must be true or false, got {echoed(getattr(self, name))}"
                )
        for name in ("families", "anchor_families", "warm_variant_families"):
            families = getattr(self, name)
            if families is not None and (
                isinstance(families, str)
                or not families
                or not all(isinstance(family, str) and family for family in families)
            ):
                raise ValueError(
                    f"improvement.{name} must be a non-empty list of family names or null, "
                    f"got {echoed(families)}"
                )
        seeds = self.pool_seeds
        if seeds is not None and (
            isinstance(seeds, (str, int))
            or not seeds
            or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in seeds)
            or len(set(seeds)) != len(seeds)
        ):
            raise ValueError(
                "improvement.pool_seeds must be a non-empty list of distinct whole numbers "
                f">= 0 or null, got {echoed(seeds)}"
            )
        both = sorted(set(self.families or ()) & set(self.anchor_families or ()))
        if both:
            raise ValueError(
                f"improvement.anchor_families: {both[0]!r} is also in improvement.families "
                f"(a family is measured or anchored, not both)"
            )
        tried = self.warm_variant_families if self.warm_variant else None
        if self.families is not None and tried is not None:
            rounds = set(self.families) | set(self.anchor_families or ())
            outside = [f for f in tried if f not in rounds]
            if outside:
                raise ValueError(
                    f"improvement.warm_variant_families: {outside[0]!r} is in neither "
                    f"improvement.families nor improvement.anchor_families (the families "
                    f"whose windows join the rounds)"
                )
        if self.agreeing not in AGREEING:
            raise ValueError(
                f"improvement.agreeing must be one of {', '.join(AGREEING)}, "
                f"got {echoed(self.agreeing)}"
            )
        lead = self.lead_requests
        if lead is not None and (isinstance(lead, bool) or not isinstance(lead, int) or lead < 0):
            raise ValueError(
                f"improvement.lead_requests must be a whole number >= 0 or null, got {echoed(lead)}"
            )
        calm = self.warm_calm_s
        if calm is not None and (
            isinstance(calm, bool)
            or not isinstance(calm, (int, float))
            or not (math.isfinite(calm) and calm > 0)
        ):
            raise ValueError(
                f"improvement.warm_calm_s must be a finite number > 0 or null, got {echoed(calm)}"
            )
        gain = self.warm_variant_gain
        if isinstance(gain, bool) or not isinstance(gain, (int, float)) or not 0 <= gain < 1:
            raise ValueError(
                f"improvement.warm_variant_gain must be a share in [0, 1), got {echoed(gain)}"
            )
        for name in ("min_gain_s", "hold_s", "learning_rate"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValueError(f"improvement.{name} must be a number, got {echoed(value)}")
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(
                    f"improvement.{name} must be a finite number >= 0, got {echoed(value)}"
                )
        if not self.warm_variant:
            defaults = {f.name: f.default for f in fields(self)}
            for name in ("warm_variant_gain", "warm_calm_s", "warm_variant_families"):
                if getattr(self, name) != defaults[name]:
                    warnings.warn(
                        f"improvement.{name}={getattr(self, name)!r} has no effect: "
                        f"improvement.warm_variant is false",
                        SettingWarning,
                        stacklevel=3,
                    )
