"""engram's one API layer: every operation a user has, as typed functions over one `Runtime`.

- `types`: the request and response types (msgspec; importable by any client);
- `errors`: `ApiError` (stable code, HTTP status, what to fix) and the translation of domain errors;
- `runtime`: the `Runtime` interface the operations need (implemented in `engram.runtime`);
- `service`: `Api`, the operations, by area in `messages`, `discussions`, `cognitive`, `work`, `admin`;
- `jobs`: replay, verify, regenerate and forget as jobs with progress.

This package imports nothing at import time, so that `engram.api.types` stays cheap for clients.
"""
