"""btb-gym's examples: scripts (``python examples/python_api.py``) and a workload of
one's own (``workload.factory=examples.own_workload:make_rows``, docs/workloads.md).

A package, not a bare folder, so that ``examples.own_workload`` is this folder's
module when a command runs from the repository's folder: a folder without an
``__init__.py`` gives way to any installed package called ``examples`` further
along ``sys.path``. It is not installed with btb-gym (pyproject.toml installs
``envs``, ``agents``, ``baselines`` and ``experiments``).
"""
