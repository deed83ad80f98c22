"""The optional compiled core (envs/sim/_native, envs/_native, baselines/_native,
envs/workloads/_native); the rest of the build is in pyproject.toml.

``pip install -e .`` (and so ``make install``) compiles the Cython modules of
those folders when a C compiler is there. Without one, or when compiling fails,
the extension is skipped with a note, the install still succeeds, and the
simulator, the observation encoder and the baselines run their pure-Python
reference modules (envs/sim/native.py, envs/encoder.py and baselines/native.py
say which one runs).
"""

from __future__ import annotations

import os
from typing import Any

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


class OptionalBuildExt(build_ext):
    """build_ext that skips an optional extension on any failure to build it (a
    missing compiler, a failed compile), with one note, and goes on."""

    def build_extension(self, ext: Any) -> None:
        try:
            super().build_extension(ext)
        except Exception as error:
            if not ext.optional:
                raise
            print(f"btb-gym: not building {ext.name} ({error}); the pure-Python simulator runs")


try:
    from Cython.Build import cythonize
except ImportError:  # only when built without the build requirements (--no-build-isolation)
    print("btb-gym: Cython is missing; building without the compiled core")
    extensions: list[Extension] = []
else:
    extensions = cythonize(
        [
            Extension("envs.sim._native.cache", ["envs/sim/_native/cache.pyx"]),
            Extension("envs.sim._native.chainer", ["envs/sim/_native/chainer.pyx"]),
            # the simulator's step times must be the reference's to the bit: no fused a*b+c
            Extension(
                "envs.sim._native.core",
                ["envs/sim/_native/core.pyx"],
                extra_compile_args=[] if os.name == "nt" else ["-ffp-contract=off"],
            ),
            # the forecast's and the observation's floats must be the reference's to the
            # bit: no fused a*b+c
            Extension(
                "envs.sim._native.forecast",
                ["envs/sim/_native/forecast.pyx"],
                extra_compile_args=[] if os.name == "nt" else ["-ffp-contract=off"],
            ),
            Extension(
                "envs._native.observation",
                ["envs/_native/observation.pyx"],
                extra_compile_args=[] if os.name == "nt" else ["-ffp-contract=off"],
            ),
            Extension("envs._native.arrivals", ["envs/_native/arrivals.pyx"]),
            Extension("envs.workloads._native.jsonl", ["envs/workloads/_native/jsonl.pyx"]),
            Extension("baselines._native.routers", ["baselines/_native/routers.pyx"]),
            Extension("baselines._native.btb", ["baselines/_native/btb.pyx"]),
        ],
        compiler_directives={"language_level": "3"},
    )
    for extension in extensions:
        extension.optional = True  # (cythonize's copies do not keep the flag)

setup(ext_modules=extensions, cmdclass={"build_ext": OptionalBuildExt})
