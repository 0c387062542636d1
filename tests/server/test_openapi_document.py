"""The OpenAPI document a developer (or a generator: clients/typescript) reads: how to authenticate (security schemes
and each operation's security), what every operation and parameter means, and refusals that name the right field.
Generic over the document, so that every operation added later is held to the same bar."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from engram.api import types as t

OPEN = {("get", "/v1/health"), ("get", "/v1/instance")}  # the only operations that need no key


@pytest.fixture(scope="module")
def document() -> dict:
    from engram.server.app import create_app

    return create_app(None, None).openapi()


def operations(doc: dict):
    for path, item in doc["paths"].items():
        for method, op in item.items():
            yield method, path, op


def test_the_document_says_how_to_present_an_api_key_and_the_inspectors_session(document):
    schemes = document["components"]["securitySchemes"]
    assert schemes["bearerKey"] == {**schemes["bearerKey"], "type": "http", "scheme": "bearer"}
    assert schemes["apiKeyHeader"]["in"] == "header" and schemes["apiKeyHeader"]["name"] == "X-API-Key"
    assert schemes["inspectorSession"]["in"] == "cookie" and schemes["inspectorSession"]["name"] == "engram_session"
    assert all(s["description"] for s in schemes.values())


def test_every_operation_declares_its_security_and_only_the_probes_need_no_key(document):
    schemes = set(document["components"]["securitySchemes"])
    for method, path, op in operations(document):
        assert "security" in op, (method, path)
        if (method, path) in OPEN:
            assert op["security"] == [], (method, path)
        else:
            assert op["security"], f"{method} {path} needs no key: add it to OPEN only if it grants nothing"
            assert all(set(req) <= schemes for req in op["security"]), (method, path)


def test_every_operation_and_parameter_is_described(document):
    for method, path, op in operations(document):
        assert op.get("summary") and len(op.get("description", "")) >= 30, (method, path)
        for param in op.get("parameters", []):
            assert param.get("description"), f"{method} {path}: parameter {param['name']} has no description"
        assert any(str(s).startswith("2") for s in op["responses"]), (method, path)
        for status, answer in op["responses"].items():
            assert answer.get("description"), (method, path, status)
    by_op = {(m, p): op for m, p, op in operations(document)}
    recall = by_op[("post", "/v1/agents/{agent}/recall")]
    assert "key allowed this agent" in recall["description"]
    assert "admin key" in by_op[("get", "/v1/status")]["description"]


def refused(cls: type, body: bytes) -> str:
    from engram.api.errors import ApiError
    from engram.server.endpoint import decode

    with pytest.raises(ApiError) as caught:
        decode(cls, body)
    assert caught.value.code == "invalid_request"
    return caught.value.message


def test_a_body_with_a_wrong_field_is_told_the_right_one():
    sql = refused(t.SqlRequest, b'{"sql": "SELECT 1"}')
    assert "unknown field `sql`" in sql and "`query` (required)" in sql
    assert "did you mean `limit`?" in refused(t.RecallRequest, b'{"query": "x", "limt": 3}')
    nested = refused(t.AppendRequest, b'{"messages": [{"role": "user", "content": "x", "tx": 1}]}')
    assert "$.messages[0]" in nested and "did you mean `ts`?" in nested and "Message's fields" in nested
    assert "did you mean" not in refused(t.RecallRequest, b'{"query": "x", "limit": 0}')


@pytest.mark.parametrize("typed, named", [(["recall", "-k", "0", "x"], "-k/--limit"),
                                          (["traces", "--limit", "0"], "--limit"),
                                          (["recall", "--limit", "many", "x"], "-k/--limit")])
def test_a_cli_count_out_of_bounds_names_the_option_the_user_typed(tmp_path, typed, named):
    engram = Path(sys.executable).with_name("engram")
    done = subprocess.run([str(engram), "--home", str(tmp_path), *typed], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    last = done.stderr.strip().splitlines()[-1]
    assert f"argument {named}: " in last and "from 1 to" in last, last


def undescribed(node, where: str = "") -> list[str]:
    """Every property of every schema in `node` (components, request bodies, inline objects, nested) without a
    description, by where it is."""
    out = []
    if isinstance(node, dict):
        for name, prop in (node.get("properties") or {}).items() if isinstance(node.get("properties"), dict) else ():
            if not (isinstance(prop, dict) and prop.get("description")):
                out.append(f"{where}.{name}")
        for key, value in node.items():
            out += undescribed(value, f"{where}/{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out += undescribed(value, f"{where}[{i}]")
    return out


def test_every_field_of_every_schema_is_described(document):
    assert undescribed(document) == []
    recall = document["components"]["schemas"]["RecallRequest"]["properties"]
    assert "ISO 8601" in recall["since"]["description"]
    item = document["components"]["schemas"]["MemoryItem"]["properties"]
    assert set(item["kind"]["enum"]) == {"trace", "fact", "chunk", "vector"}  # not the listing's kinds
    assert "<out>/log/" in document["components"]["schemas"]["ExportRequest"]["properties"]["out"]["description"]


def test_the_check_finds_an_undescribed_field_wherever_it_is():
    doc = {"components": {"schemas": {"A": {"properties": {"x": {"type": "string", "description": "X."},
                                                           "y": {"type": "integer"}}}}},
           "paths": {"/p": {"post": {"requestBody": {"content": {"application/json": {"schema": {
               "properties": {"o": {"description": "O.", "properties": {"deep": {"type": "number"}}}}}}}}}}}}
    assert undescribed(doc) == ["/components/schemas/A.y",
                                "/paths//p/post/requestBody/content/application/json/schema/properties/o.deep"]
