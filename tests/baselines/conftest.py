"""Make ``statekit.py`` importable as ``statekit`` from the test modules here, whatever
pytest's import mode (importlib mode does not put test directories on ``sys.path``)."""

from __future__ import annotations

import sys
from pathlib import Path

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
