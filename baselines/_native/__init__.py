"""The baselines' compiled part: Cython twins of their hottest Python code.

``routers.pyx`` is the routers' per-node scans of :mod:`baselines.routers`
(``up_nodes``, ``least_loaded``, ``cache_aware_choice``, ``soonest_node``) and
``btb.pyx`` BTB's per-arrival decision (:meth:`baselines.btb.BTB.decide` with the
rules of ``btb_pending`` and the threshold env's switched BTB, and the X-in-Z count
of :class:`baselines.window.ArrivalWindow`), written for a C compiler: the same
choices and the same random draws, call for call. They read the compiled
simulator's nodes and caches as C structs (``envs/sim/_native/core.pxd`` and
``cache.pxd``); on the reference simulator's nodes they call the Python code.
``pip install -e .`` builds them when a C compiler is there; :mod:`baselines.native`
decides which implementation runs (``BTB_GYM_PURE_PYTHON=1`` forces the reference).
"""
