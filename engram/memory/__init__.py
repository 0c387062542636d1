"""The memory domain, pure: cognitive memory, discussion memory, background processes (Observer, Reflector, consolidation), infinite context, ingest, and the recorded settings fold."""
