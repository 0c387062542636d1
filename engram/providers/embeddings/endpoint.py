"""An embedding server the user runs or rents: an `llm.endpoints` entry of apiType `openAIEmbeddings` or `ollamaEmbeddings`.

    "llm": {"endpoints": {"embed": {"apiType": "openAIEmbeddings", "baseUrl": "http://127.0.0.1:8080", "model": "nomic"}}},
    "embedder": {"name": "endpoint", "endpoint": "embed"}

The HTTP call is the endpoint layer's (`EndpointClient.embed`: `POST /v1/embeddings` or `POST /api/embed`, the
endpoint's key, headers, timeout and concurrency slots; no retries: an embedding that cannot be had is an error
the caller sees at once). What this adds is the `Embedder` contract:

- batches of `batchSize` texts per request (never an empty one: llama.cpp answers an empty input with a 500);
- L2-normalised rows (llama.cpp's server returns unnormalised vectors; cosine ranking needs unit rows);
- the dimension discovered once, on first use, and checked on every answer: a server whose model changed under
  the same name is refused rather than mixed in;
- an identity, `name`, that says whose vectors these are: apiType, model, the server's URL (llama-cpp-python's
  server answers to any model name, so the name alone does not say which model made a vector) and the
  dimension. The name keys every cached vector and is recorded with every index, so a change of embedder can
  never mix vectors: status lists what was embedded by another one, and `engram reindex` rebuilds it.
"""

from __future__ import annotations

import threading
from typing import Mapping, Sequence

import numpy as np

from engram.config.llm import EMBEDDING_API_TYPES, Endpoint
from engram.providers.embeddings.base import l2_normalise

# Embedded once to learn the dimension (any non-empty text would do).
PROBE_TEXT = "engram: how many dimensions?"


class EmbedderUnavailable(RuntimeError):
    """The embedding endpoint could not embed: one line naming the endpoint and what to fix."""


def _fix(name: str, kind: str | None, transient: bool, message: str) -> str:
    if "embedding=True" in message or "--embedding" in message:
        return " — start the server with embeddings on (llama.cpp: --embedding)"
    if kind in ("model_missing", "auth", "not_found", "context"):
        return ""  # the endpoint layer's own hint is already in the message
    if transient:
        return f" — is the server running? check llm.endpoints.{name}.baseUrl"
    return f" — check llm.endpoints.{name} (apiType, baseUrl, model)"


def identity(endpoint: Endpoint, dim: int | str) -> str:
    """The embedder name of `endpoint`'s vectors of `dim` dimensions: `<apiType>:<model>@<url>/<dim>d`."""
    return f"{endpoint.api_type}:{endpoint.model or '(server default)'}@{endpoint.url}/{dim}d"


class EndpointEmbedder:
    is_fallback = False

    def __init__(self, endpoint_name: str, endpoint: Endpoint, *, batch_size: int = 16,
                 env: Mapping[str, str] | None = None, client=None):
        if endpoint.api_type not in EMBEDDING_API_TYPES:
            raise EmbedderUnavailable(f"embedder endpoint {endpoint_name!r} has apiType {endpoint.api_type!r}: set "
                                      f"llm.endpoints.{endpoint_name}.apiType to {' or '.join(EMBEDDING_API_TYPES)}")
        self.endpoint_name, self.endpoint = endpoint_name, endpoint
        self.batch_size = batch_size
        if client is None:
            from engram.providers.endpoints.client import EndpointClient
            from engram.providers.endpoints.wire import CallFailed

            try:
                client = EndpointClient(endpoint_name, endpoint, env=env)
            except CallFailed as failed:  # e.g. its key variable is not set
                raise EmbedderUnavailable(f"embedder: {failed.error}") from None
        self.client = client
        self._dim: int | None = None
        self._lock = threading.Lock()

    # The dimension is the server's: learnt from one probe on first use (then checked on every answer).
    @property
    def dim(self) -> int:
        if self._dim is None:
            with self._lock:
                if self._dim is None:
                    rows = self._call([PROBE_TEXT])
                    self._dim = len(rows[0])
                    if self._dim == 0:
                        raise EmbedderUnavailable(f"embedder endpoint {self.endpoint_name!r} answered an empty vector")
        return self._dim

    @property
    def name(self) -> str:
        return identity(self.endpoint, self.dim)

    def _call(self, texts: list[str]) -> list[list[float]]:
        from engram.providers.endpoints.wire import CallFailed

        try:
            rows = self.client.embed(texts)
        except CallFailed as failed:
            raise EmbedderUnavailable(
                f"embedder: {failed.error}{_fix(self.endpoint_name, failed.kind, failed.transient, failed.error)}"
            ) from None
        if len(rows) != len(texts):
            raise EmbedderUnavailable(f"embedder endpoint {self.endpoint_name!r} answered {len(rows)} vectors for "
                                      f"{len(texts)} texts — check llm.endpoints.{self.endpoint_name}.apiType")
        return rows

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        dim = self.dim
        out = np.zeros((len(texts), dim), dtype=np.float32)
        wanted = [i for i, t in enumerate(texts) if t.strip()]  # empty texts: zero rows, as every embedder
        for start in range(0, len(wanted), self.batch_size):
            rows = wanted[start : start + self.batch_size]
            answer = self._call([texts[i] for i in rows])
            widths = {len(v) for v in answer}
            if widths != {dim}:
                raise EmbedderUnavailable(
                    f"embedder endpoint {self.endpoint_name!r} answered vectors of {sorted(widths)} dimensions, "
                    f"not the {dim} it answered first: the server's model changed — restart engram, then run "
                    f"`engram reindex`")
            out[rows] = np.asarray(answer, dtype=np.float32)
        if wanted:
            out[wanted] = l2_normalise(out[wanted])
        return out

    def close(self) -> None:
        self.client.close()
