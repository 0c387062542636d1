"""Projections: pure folds of the log into read models (files, HNSW indexes, DuckDB tables); replayable."""
