"""CATM: mine file-access supervision from coding-agent trajectories (docs/mining.md)."""
