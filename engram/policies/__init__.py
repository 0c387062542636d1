"""Policies: consumers that react to events by deciding on new events (recorded in the log)."""
