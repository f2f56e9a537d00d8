"""Algorithms, their fused training loops, sweeps, recipes, bench and CLI."""
