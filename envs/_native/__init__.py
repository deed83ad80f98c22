"""The environments' compiled part: a Cython twin of the observation's hottest loop.

``observation.pyx`` is the per-node rows of :class:`envs.encoder.ObservationEncoder`,
written for a C compiler over the compiled forecast
(``envs/sim/_native/forecast.pyx``: :func:`envs.sim.forecast.estimates_with_hits`,
:mod:`envs.sim.queue_costs`): the same floats, bit for bit. ``pip install -e .``
builds it when a C compiler is there; ``envs.encoder`` decides which
implementation runs (``BTB_GYM_PURE_PYTHON=1`` forces the reference).
"""
