"""`_DiscussionId-MemoryFile-Workflow-Settings.json`: every key of the WilmerAI memory guide."""

from __future__ import annotations

from pydantic import Field

from engram.config import defaults as d
from engram.config.base import ConfigModel

SETTINGS_FILE_NAME = "_DiscussionId-MemoryFile-Workflow-Settings.json"

DEFAULT_SYSTEM_PROMPT = (
    "You are an expert summarizer. You write concise, factual summaries of conversation "
    "excerpts, keeping names, dates, decisions and commitments."
)
DEFAULT_PROMPT = "Please summarize the following conversation excerpt:\n\n[TextChunk]"


class DiscussionSettings(ConfigModel):
    """Memory settings for discussions; keys exactly as users write them in the file."""

    # Sets the default behaviour of the QualityMemory node.
    use_vector_for_quality_memory: bool = True
    # Vector memory.
    vector_memory_workflow_name: str | None = None
    vector_memory_endpoint_name: str | None = None
    vector_memory_preset: str | None = None
    vector_memory_max_response_size_in_tokens: int = Field(d.VECTOR_MEMORY_MAX_RESPONSE_TOKENS, gt=0)
    vector_memory_chunk_estimated_token_size: int = Field(d.CHUNK_ESTIMATED_TOKEN_SIZE, gt=0)
    vector_memory_max_messages_between_chunks: int = Field(d.MAX_MESSAGES_BETWEEN_CHUNKS, gt=0)
    vector_memory_look_back_turns: int = Field(d.LOOKBACK_START_TURN, ge=0)
    # File-based memory.
    file_memory_workflow_name: str | None = None
    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    prompt: str = DEFAULT_PROMPT
    chunk_estimated_token_size: int = Field(d.CHUNK_ESTIMATED_TOKEN_SIZE, gt=0)
    max_messages_between_chunks: int = Field(d.MAX_MESSAGES_BETWEEN_CHUNKS, gt=0)
    lookback_start_turn: int = Field(d.LOOKBACK_START_TURN, ge=0)
    # General / fallback LLM settings. Endpoints and presets are named in engram.json (`llm.endpoints`,
    # `llm.presets`); None leaves each memory task on its configured route (`llm.tasks`, else "default").
    endpoint_name: str | None = None
    preset: str | None = None
    max_response_size_in_tokens: int = Field(d.MAX_RESPONSE_SIZE_IN_TOKENS, gt=0)
