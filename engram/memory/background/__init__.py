"""The background processes of Wunderland's memory as pure logic: no Ray, no I/O, no clock.

- `observation_log`: the fold of observation events into each observation log (notes, their
  status, token counts); the Observer, the Reflector and the projection share it.
- `observer`: when to observe an increment (async buffering) and when to activate (the 30K threshold).
- `reflector`: a reflection (memory task output) as trace, edge and conflict events (the 40K threshold).
- `conflicts`: who wins a contradiction, by personality.
- `clock`: clock ticks in event time (interval boundaries crossed) and in wall-clock time.
- `consolidation`: one consolidation run, five steps, bounded.
- `traces`: an agent's traces and graph, folded without embeddings, for the Reflector and Consolidator.
- `render`: the observation log as markdown (`Date:` headings, bullet notes with nested details).

Time is always event time in microseconds (`*_us`), passed in by the caller.
"""
