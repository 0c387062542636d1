"""`<id>_vector_memory.db` is written from a schema-initialised empty store through one DuckDB connection per
process (bench/memory_files.py measures the cost per file): each file is still a plain DuckDB database, one file
with no WAL beside it, with the tables a user queries, exactly as creating them would give."""

from __future__ import annotations

import threading
from pathlib import Path

import duckdb
import numpy as np

from engram.memory.discussion.vectors import STORE_FORMAT, VectorMemoryRow, VectorStore, _DDL, write_store

T0 = 1_767_225_600_000_000


def row(i: int) -> VectorMemoryRow:
    vector = np.zeros(384, dtype=np.float32)
    vector[i] = 1.0
    return VectorMemoryRow(
        memory_id=f"vm-{i}", generation=0, title=f"Parcel {i}", summary=f"The parcel {i} leaves the Porto depot.",
        entities=("Porto",), key_phrases=("blue parcel",), topics=("delivery",), sentiment="neutral", first_seq=1,
        last_seq=3, message_ids=("m0", "m1"), token_count=60, first_ts_us=T0, last_ts_us=T0 + 1, created_seq=4 + i,
        created_ts_us=T0 + 2, mode="standard", trigger="tokens", llm_provider="offline", llm_model="offline-heuristic-v1",
        workflow=None, embedding_model="minilm", vector=vector)


def info(discussion: str) -> dict[str, str]:
    return {"discussion_id": discussion, "agent": "ann", "generation": "0", "reflects_seq": "7", "embedding_model": ""}


def schema(con: duckdb.DuckDBPyConnection) -> dict[str, list[tuple]]:
    tables = [t for (t,) in con.execute("SELECT table_name FROM duckdb_tables() ORDER BY table_name").fetchall()]
    return {t: con.execute(f'DESCRIBE "{t}"').fetchall() for t in tables}


def test_a_new_discussions_vector_store_is_one_duckdb_file_with_the_tables_a_user_queries(tmp_path):
    created = tmp_path / "created.db"  # the tables created directly in a new database: what the store must have
    con = duckdb.connect(str(created))
    for ddl in _DDL:
        con.execute(ddl)
    expected = schema(con)
    con.close()

    path = tmp_path / "agents" / "ann" / "Public" / "chat-1_vector_memory.db"
    write_store(path, [], info("chat-1"))
    assert sorted(p.name for p in path.parent.iterdir()) == ["chat-1_vector_memory.db"]  # no WAL, no temporary file
    con = duckdb.connect(str(path), read_only=True)
    try:
        assert schema(con) == expected and sorted(expected) == ["embeddings", "hnsw_index", "memories", "store_info"]
        assert dict(con.execute("SELECT key, value FROM store_info").fetchall()) == {
            "format": STORE_FORMAT, "memory_count": "0", **info("chat-1")}
        assert con.execute("SELECT count(*) FROM memories").fetchone() == (0,)
    finally:
        con.close()
    assert len(VectorStore.open(path)) == 0


def test_a_store_written_again_holds_its_memories_and_their_index(tmp_path):
    path = tmp_path / "chat-1_vector_memory.db"
    write_store(path, [], info("chat-1"))
    write_store(path, [row(0), row(1), row(2)], info("chat-1"))
    store = VectorStore.open(path)
    assert [r.memory_id for r in store.rows] == ["vm-0", "vm-1", "vm-2"]
    assert store.rows[1].title == "Parcel 1" and store.rows[1].message_ids == ("m0", "m1")
    assert store.info["memory_count"] == "3"
    assert store.hnsw.search(row(2).vector, 1)[0][0] == "vm-2"
    write_store(path, [row(0)], info("chat-1"))  # a regeneration: the whole store replaced
    assert [r.memory_id for r in VectorStore.open(path).rows] == ["vm-0"]


def test_stores_written_from_several_threads_at_once_are_each_whole(tmp_path):
    def writer(w: int) -> None:
        for k in range(5):
            write_store(tmp_path / f"d{w}-{k}_vector_memory.db", [row(k)] if k % 2 else [], info(f"d{w}-{k}"))

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    files = sorted(tmp_path.iterdir())
    assert len(files) == 20 and all(f.name.endswith("_vector_memory.db") for f in files)
    for f in files:
        store = VectorStore.open(f)
        discussion = f.name.removesuffix("_vector_memory.db")
        assert store.info["discussion_id"] == discussion
        assert len(store) == int(discussion.split("-")[1]) % 2
