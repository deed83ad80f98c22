"""btb-gym environments: the cluster simulator (``envs.sim``), workloads
(``envs.workloads``) and, on top of them, the Gymnasium environments."""
