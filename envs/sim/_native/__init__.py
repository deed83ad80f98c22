"""The compiled core: Cython twins of the simulator's hottest Python modules.

``cache.pyx`` is :mod:`envs.sim.cache` (the readable reference and the test
oracle) written for a C compiler: the same tree, the same LRU heaps, the same
results, call for call. ``pip install -e .`` builds it when a C compiler is
there; :mod:`envs.sim.native` decides which implementation the simulator runs.
"""
