"""A front end's JSON schema on a grammar-only server (KoboldCpp, `/v1/completions`): held to what engram's GBNF
grammar enforces. A keyword the grammar would leave out is refused by name, never silently weakened; the array and
string bounds it does enforce are in the grammar, which llama.cpp's own parser accepts."""

from __future__ import annotations

import pytest

from engram.providers.endpoints.adapters import refused_asks
from engram.providers.endpoints.gbnf import grammar, unenforced
from engram.providers.endpoints.wire import Asks, Structured
from engram.providers.llm.answers.schemas import SCHEMAS

NAME = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 40}}, "required": ["name"],
        "additionalProperties": False}


@pytest.mark.parametrize(("schema", "keyword"), [
    ({"type": "string", "pattern": "^[a-z]+$"}, "pattern"),
    ({"type": "object", "properties": {"age": {"type": "integer", "minimum": 0}}}, "minimum"),
    ({"type": "array", "items": {"type": "string", "format": "date-time"}}, "format"),
    ({"anyOf": [{"type": "string"}, {"type": "integer"}]}, "anyOf"),
    ({"type": ["string", "null"]}, "type (a list of types)"),
    ({"$ref": "#/$defs/name", "$defs": {"name": {"type": "string"}}}, "$ref"),
])
def test_a_keyword_the_grammar_would_leave_out_is_named(schema, keyword):
    assert unenforced(schema) == keyword


def test_what_the_grammar_enforces_is_taken_whole():
    assert unenforced(NAME) is None
    assert unenforced({"type": "array", "items": NAME, "minItems": 1, "maxItems": 3}) is None
    assert unenforced({"type": "string", "enum": ["a", "b"], "description": "one of two"}) is None


@pytest.mark.parametrize("api_type", ["koboldCppGenerate", "openAIV1Completion"])
def test_a_grammar_only_server_refuses_a_front_ends_schema_it_cannot_enforce_naming_the_keyword(api_type):
    weak = {"type": "object", "properties": {"code": {"type": "string", "pattern": "^[0-9]{4}$"}}}
    why = refused_asks(api_type, Asks(format=Structured(name="reply", schema=weak)))
    assert why is not None and why.startswith('"format"') and 'cannot enforce "pattern"' in why and api_type in why
    assert refused_asks(api_type, Asks(format=Structured(name="reply", schema=NAME))) is None
    # A server that takes the schema itself (not a grammar engram writes) is not held to the grammar's subset.
    assert refused_asks("ollamaApiChat", Asks(format=Structured(name="reply", schema=weak))) is None


def test_min_items_is_a_repetition_count_of_the_grammar_and_llama_cpp_parses_it(tmp_path):
    schema = {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 4}
    text = grammar(schema)
    assert '( ws "," ws integer ){1,3}' in text and "? ws" not in text.splitlines()[1]
    with pytest.raises(ValueError, match="minItems 5 is above maxItems 4"):
        grammar({**schema, "minItems": 5})
    llama_cpp = pytest.importorskip("llama_cpp")
    from tests.providers.endpoints import tiny_gguf

    path = tmp_path / "tiny.gguf"
    tiny_gguf.write(path)
    model = llama_cpp.Llama(str(path), vocab_only=True, verbose=False)
    vocab = llama_cpp.llama_model_get_vocab(model.model)
    assert llama_cpp.llama_sampler_init_grammar(vocab, text.encode(), b"root"), text


def test_engrams_own_answer_schemas_still_make_grammars():
    for task, schema in SCHEMAS.items():
        assert grammar(schema).startswith("root ::= "), task
