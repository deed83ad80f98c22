"""Compiled trace reading: the Cython twin of the Mooncake JSONL read loop.

``jsonl.pyx`` reads the well-formed lines of a Mooncake file itself and hands every
other line to the readable reference (:mod:`envs.workloads.readers.base` and
``sources``), so what a read gives, and every error and warning, is the reference's.
``pip install -e .`` builds it with the simulator's compiled core;
:mod:`envs.workloads.readers.compiled` decides whether it runs.
"""
