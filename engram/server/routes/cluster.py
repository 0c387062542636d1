"""The home across shards and nodes: re-sharding and export (jobs)."""

from __future__ import annotations

from fastapi import APIRouter

from engram.api import types as t
from engram.api.access import ScopedApi
from engram.server.endpoint import route

router = APIRouter(tags=["cluster"])


@route(router, "POST", "/v1/reshard", body=t.ReshardRequest, response=t.Job, status=202, errors=("conflict",))
def reshard(api: ScopedApi, body: t.ReshardRequest) -> t.Job:
    """Start a re-sharding job: grow the home to `shards` shards, moving only the agents the new layout places
    on a new shard (their events keep their positions; appends wait while it switches). Progress counts events."""
    return api.reshard(body)


@route(router, "POST", "/v1/reindex", response=t.Job, status=202, errors=("conflict",))
def reindex(api: ScopedApi) -> t.Job:
    """Start a re-embedding job: everything the home's vectors are made of is embedded with the embedder engram.json
    names (while the home keeps serving with its own), then the home switches to it: the trace indexes are rebuilt
    from the log, the discussions' vector memories get their new vectors recorded. Progress counts texts."""
    return api.reindex()


@route(router, "POST", "/v1/export", body=t.ExportRequest, response=t.Job, status=202, errors=("conflict",))
def export(api: ScopedApi, body: t.ExportRequest) -> t.Job:
    """Start an export job: the log and every projection table of every shard as Parquet files (plus the
    projection files), for plain DuckDB: `SELECT * FROM '<out>/log/*.parquet'`."""
    return api.export(body)


@route(router, "POST", "/v1/regenerate", body=t.BatchRegenerateRequest, response=t.Job, status=202,
       errors=("conflict", "unknown_agent", "unknown_discussion", "invalid_id"))
def regenerate_batch(api: ScopedApi, body: t.BatchRegenerateRequest) -> t.Job:
    """Start a regeneration of discussion memory through the Message Batches API (Claude, half the price): every
    discussion of the home (or of `agent`, or one `discussion`) in one job of batch rounds, resumable after a
    restart (`resume`). Progress counts discussions; refused with the offline heuristic, which has no batch API."""
    return api.regenerate_batch(body)
