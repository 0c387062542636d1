"""Evaluation helpers shared by the benchmarks (and tested like the rest of engram)."""
