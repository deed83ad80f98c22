"""Settings for the whole suite.

One torch (OpenMP) thread per test process. The suite's networks are tiny and it
runs on as many processes as there are cores (``make test``: pytest-xdist), so a
second thread per process only spins: it cost the agent tests about 40 % more CPU
time, taken from the other test process. Set before any test module imports
torch; commands the tests start inherit it. A value already in the environment
is kept.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
