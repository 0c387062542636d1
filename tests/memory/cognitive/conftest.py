"""The real MiniLM embedder (the default), made once for the cognitive tests that need it."""

import pytest

from engram.providers.embeddings import make_embedder


@pytest.fixture(scope="session")
def embedder():
    return make_embedder()
