"""Search structures shared by discussion memory and cognitive memory: HNSW and BM25."""
