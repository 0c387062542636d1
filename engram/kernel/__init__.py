"""The kernel: ids, tokens, timing, file locks, flow control, placement and sharding, gates, safe file writes, private files, logging. Imports nothing of engram outside it."""
