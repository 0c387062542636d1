"""Ray actor shells. Each wraps a plain class that holds the logic (no Ray there)."""
