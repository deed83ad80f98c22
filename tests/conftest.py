"""Settings for the whole suite.

One torch (OpenMP) thread per test process. The suite's networks are tiny and it
runs on as many processes as there are cores (``make test``: pytest-xdist), so a
second thread per process only spins: it cost the agent tests about 40 % more CPU
time, taken from the other test process. Set before any test module imports
torch; commands the tests start inherit it. A value already in the environment
is kept.

Hang-ups at their default action. Under ``nohup`` SIGHUP is ignored, and every
process the tests start inherits that; the commands rightly leave an ignored
SIGHUP alone, so the tests of how a command ends on a hang-up would fail there.
The suite's processes take it back to the default (a terminal that hangs up ends
the test run, as it would without ``nohup``).
"""

from __future__ import annotations

import os
import signal

os.environ.setdefault("OMP_NUM_THREADS", "1")
if signal.getsignal(signal.SIGHUP) is signal.SIG_IGN:
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
