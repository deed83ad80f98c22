"""The optional compiled core (envs/sim/_native); the rest of the build is in pyproject.toml.

``pip install -e .`` (and so ``make install``) compiles the Cython modules of
envs/sim/_native when a C compiler is there. Without one the extension is skipped
(``optional=True``), the install still succeeds, and the simulator runs its
pure-Python reference modules (envs/sim/native.py says which one runs).
"""

from __future__ import annotations

from setuptools import Extension, setup

try:
    from Cython.Build import cythonize
except ImportError:  # only when built without the build requirements (--no-build-isolation)
    print("btb-gym: Cython is missing; building without the compiled core")
    extensions: list[Extension] = []
else:
    extensions = cythonize(
        [Extension("envs.sim._native.cache", ["envs/sim/_native/cache.pyx"], optional=True)],
        compiler_directives={"language_level": "3"},
    )

setup(ext_modules=extensions)
