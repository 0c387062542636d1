"""Providers: LLM memory tasks (`llm`), embedders (`embeddings`), indexes (`search`), and the services a process gives its policies and projections (`services`)."""
