"""Composition roots: the only modules that know every layer (`python -m engram.boot serve`, `engram.Engram`, the Ray Serve deployment)."""
