"""The WilmerAI settings file: every key of the guide, as users write it, comments allowed."""

import json

import pytest

from engram.config import ConfigError, DiscussionSettings, SETTINGS_FILE_NAME, load

GUIDE_EXAMPLE = """{
  // Sets the default behavior for the QualityMemory node.
  "useVectorForQualityMemory": true,
  // ====================================================================
  // == Vector Memory Configuration
  // ====================================================================
  // Specify a workflow to generate the structured JSON for a vector memory.
  "vectorMemoryWorkflowName": "my-vector-memory-workflow",
  // The settings below are used if "vectorMemoryWorkflowName" is not set.
  "vectorMemoryEndpointName": "gpt-4-turbo",
  "vectorMemoryPreset": "default_preset_for_json_output",
  "vectorMemoryMaxResponseSizeInTokens": 1024,
  "vectorMemoryChunkEstimatedTokenSize": 1000,
  "vectorMemoryMaxMessagesBetweenChunks": 5,
  "vectorMemoryLookBackTurns": 3,
  // ====================================================================
  // == File-based Memory Configuration
  // ====================================================================
  // Specify a workflow to generate the summary text for a file-based memory.
  "fileMemoryWorkflowName": "my-file-memory-workflow",
  // The prompts below are used if "fileMemoryWorkflowName" is not set.
  "systemPrompt": "You are an expert summarizer...",
  "prompt": "Please summarize the following: [TextChunk]",
  "chunkEstimatedTokenSize": 1000,
  "maxMessagesBetweenChunks": 5,
  "lookbackStartTurn": 3,
  /* == General / Fallback LLM Settings == */
  // The default LLM endpoint to use if a specific one isn't set.
  "endpointName": "default_endpoint",
  "preset": "default_preset",
  "maxResponseSizeInTokens": 400
}
"""


def test_the_guides_example_file_loads_with_every_key(tmp_path):
    path = tmp_path / SETTINGS_FILE_NAME
    path.write_text(GUIDE_EXAMPLE)
    s = load(DiscussionSettings, path)
    assert s.use_vector_for_quality_memory is True
    assert s.vector_memory_workflow_name == "my-vector-memory-workflow"
    assert s.vector_memory_endpoint_name == "gpt-4-turbo"
    assert s.vector_memory_preset == "default_preset_for_json_output"
    assert (s.vector_memory_max_response_size_in_tokens, s.vector_memory_chunk_estimated_token_size) == (1024, 1000)
    assert (s.vector_memory_max_messages_between_chunks, s.vector_memory_look_back_turns) == (5, 3)
    assert s.file_memory_workflow_name == "my-file-memory-workflow"
    assert s.system_prompt == "You are an expert summarizer..."
    assert s.prompt == "Please summarize the following: [TextChunk]"
    assert (s.chunk_estimated_token_size, s.max_messages_between_chunks, s.lookback_start_turn) == (1000, 5, 3)
    assert (s.endpoint_name, s.preset, s.max_response_size_in_tokens) == ("default_endpoint", "default_preset", 400)


def test_keys_are_written_back_exactly_as_users_write_them():
    keys = set(DiscussionSettings().to_json_dict())
    assert keys == {
        "useVectorForQualityMemory", "vectorMemoryWorkflowName", "vectorMemoryEndpointName", "vectorMemoryPreset",
        "vectorMemoryMaxResponseSizeInTokens", "vectorMemoryChunkEstimatedTokenSize",
        "vectorMemoryMaxMessagesBetweenChunks", "vectorMemoryLookBackTurns", "fileMemoryWorkflowName",
        "systemPrompt", "prompt", "chunkEstimatedTokenSize", "maxMessagesBetweenChunks", "lookbackStartTurn",
        "endpointName", "preset", "maxResponseSizeInTokens",
    }


def test_comment_markers_inside_strings_are_kept(tmp_path):
    path = tmp_path / "s.json"
    path.write_text('{"prompt": "see http://example.com /* not a comment */ [TextChunk]" // real comment\n}')
    assert load(DiscussionSettings, path).prompt == "see http://example.com /* not a comment */ [TextChunk]"


def test_a_misspelt_key_names_the_file_and_the_closest_valid_key(tmp_path):
    path = tmp_path / SETTINGS_FILE_NAME
    path.write_text(json.dumps({"chunkEstimatedTokenSise": 2000}))
    with pytest.raises(ConfigError) as err:
        load(DiscussionSettings, path)
    assert str(path) in str(err.value)
    assert "unknown key 'chunkEstimatedTokenSise'; did you mean 'chunkEstimatedTokenSize'?" in str(err.value)


def test_a_wrong_type_names_the_field(tmp_path):
    path = tmp_path / SETTINGS_FILE_NAME
    path.write_text('{"maxMessagesBetweenChunks": "lots"}')
    with pytest.raises(ConfigError, match="maxMessagesBetweenChunks: Input should be a valid integer"):
        load(DiscussionSettings, path)


def test_malformed_json_names_line_and_column(tmp_path):
    path = tmp_path / SETTINGS_FILE_NAME
    path.write_text('{\n  // comment\n  "prompt": "x",,\n}')
    with pytest.raises(ConfigError, match=rf"{path}:3:\d+: "):
        load(DiscussionSettings, path)


def test_an_unterminated_block_comment_is_an_error(tmp_path):
    path = tmp_path / SETTINGS_FILE_NAME
    path.write_text('{"prompt": "x" /* never closed }')
    with pytest.raises(ConfigError, match="unterminated /\\* comment"):
        load(DiscussionSettings, path)


def test_nonpositive_thresholds_are_refused():
    with pytest.raises(Exception, match="chunkEstimatedTokenSize"):
        DiscussionSettings.model_validate({"chunkEstimatedTokenSize": 0})
