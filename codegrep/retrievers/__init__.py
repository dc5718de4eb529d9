"""Retrievers behind one interface: bm25, dense, grep-heuristic, agent, oracle, random."""
