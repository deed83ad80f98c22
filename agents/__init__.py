"""Learned policies (stable-baselines3 / sb3-contrib + torch) behind the same
Policy interface as the baselines."""
