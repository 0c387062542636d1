"""The HTTP face of engram: one FastAPI app over `engram.api` (REST now; /v1 proxy, /mcp and /inspect later).

- `instance`: `<home>/instance.json`, the start lock, the health probe and starting a server for a
  command (stdlib only: the CLI imports it);
- `app`: `create_app(api, …)`, the app; `routes/`: one router module per area;
- `endpoint`: how an API operation becomes a route (msgspec bodies, JSON errors, OpenAPI schemas);
- `auth`: the per-request hook that says which agents a request may touch.

The server never imports Ray: the composition root `engram.boot.serve` gives it an `Api` over a runtime.
"""
