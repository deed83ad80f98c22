"""The compiled core: Cython twins of the simulator's hottest Python code.

``cache.pyx`` is :mod:`envs.sim.cache` (the readable reference and the test
oracle) written for a C compiler: the same tree, the same LRU heaps, the same
results, call for call (``cache.pxd`` is its C interface). ``core.pyx`` is the
simulator's hot path: a typed twin of :class:`envs.sim.node.Node` and of the
per-event methods of :class:`envs.sim.simulator.Simulator` (the same runs, to
the bit). ``chainer.pyx`` is the trace readers' ``BlockChainer``. ``forecast.pyx``
is the first-token forecast (:func:`envs.sim.forecast.estimates_with_hits`), for
the observation's compiled rows and for the routers that route by it
(:mod:`baselines.native` chooses it for them).
``pip install -e .`` builds them when a C compiler is there;
:mod:`envs.sim.native` decides which implementation the simulator runs.
"""
