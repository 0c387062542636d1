"""Which embedder a home serves with, recorded in the home: a change of `embedder` in engram.json waits for `engram reindex`.

Every vector of a home (the trace indexes, the policies' memories, the discussions' vector stores, the embedding
cache) was made by one embedder. A changed `embedder` setting (another model, another server, another apiType)
must not put vectors of two models side by side, so the home keeps serving with the embedder it was built with,
recorded in `<home>/state/embedder.json`; status says what the configured one would have to re-embed, and
`engram reindex` embeds it, switches, and records the new one. The record holds the embedder's settings (an
endpoint's included), so the home can still call the old endpoint after engram.json has moved on.
"""

from __future__ import annotations

import json
from pathlib import Path

from engram.config.llm import EmbedderConfig
from engram.kernel.files import atomic_write

RECORD_RELATIVE_PATH = Path("state") / "embedder.json"


def embedder_key(config: EmbedderConfig) -> str:
    """What makes two embedder settings give the same vectors (batch size and threads do not):
    `minilm`, `hashing`, or `endpoint <apiType> <model> <url>`."""
    if config.name == "endpoint" and config.endpoint_settings is not None:
        e = config.endpoint_settings
        return f"endpoint {e.api_type} {e.model or '-'} {e.url}"
    return "hashing" if config.name == "hashing" else "minilm"  # "auto" is MiniLM where it is installed


def record_path(home: str | Path) -> Path:
    return Path(home) / RECORD_RELATIVE_PATH


def read_serving_embedder(home: str | Path) -> EmbedderConfig | None:
    path = record_path(home)
    if not path.exists():
        return None
    return EmbedderConfig.model_validate(json.loads(path.read_text())["embedder"])


def record_serving_embedder(home: str | Path, config: EmbedderConfig) -> None:
    path = record_path(home)
    path.parent.mkdir(parents=True, exist_ok=True)
    body = {"embedder": config.to_json_dict(), "key": embedder_key(config)}
    atomic_write(path, (json.dumps(body, indent=1, sort_keys=True) + "\n").encode())


def serving_embedder(home: str | Path, configured: EmbedderConfig, *, has_data: bool) -> EmbedderConfig:
    """The embedder the home serves with: the configured one unless the home's vectors were made by another.

    A home without a record is recorded now: a new one (no log yet) with the configured embedder; one made before
    the record existed with the embedder it could only have been built with (the configured one, unless that is an
    endpoint, which earlier versions did not have: then MiniLM, the default). When the recorded embedder is the
    configured one (same key), the configured settings are used (a new timeout or key variable applies at once)."""
    recorded = read_serving_embedder(home)
    if recorded is None:
        recorded = configured if not has_data or configured.name != "endpoint" else EmbedderConfig(
            batch_size=configured.batch_size, threads=configured.threads)
        record_serving_embedder(home, recorded)
    return configured if embedder_key(recorded) == embedder_key(configured) else recorded
