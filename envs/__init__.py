"""btb-gym environments.

``envs.sim`` is the cluster simulator and ``envs.workloads`` the workloads;
neither needs gymnasium. Importing ``envs`` registers the Gymnasium
environments under the ``btb`` namespace (when gymnasium is installed):

* ``btb/Route-v0``: pick the node for each arriving request;
* ``btb/RouteWarm-v0``: route, and warm / evict the request's prefix;
* ``btb/Thresholds-v0``: set BTB's thresholds every decision epoch.
"""

ENTRY_POINTS = {
    "btb/Route-v0": "envs.route:RouteEnv",
    "btb/RouteWarm-v0": "envs.route_warm:RouteWarmEnv",
    "btb/Thresholds-v0": "envs.thresholds:ThresholdsEnv",
}
"""Each environment's id and its class (``module:Class``)."""
ENV_IDS = tuple(ENTRY_POINTS)


def _register() -> None:
    try:
        from gymnasium.envs.registration import register, registry
    except ImportError:  # the simulator and workloads work without gymnasium
        return
    for env_id, entry_point in ENTRY_POINTS.items():
        if env_id not in registry:
            register(id=env_id, entry_point=entry_point)


_register()
