"""The catalogue of bad inputs: every row is one input a user (or an attacker) can give, the layer that owns its
validation, and the clear error engram answers with. One place for the cases: the test runs every row
(tests/reliability/test_bad_inputs.py) and docs/bad-input.md is rendered from them:

    .venv/bin/python -m tests.reliability.bad_inputs > docs/bad-input.md
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

NOW = 1_714_557_600_000_000
AGENT_OK = "ana"


@dataclass(frozen=True)
class Case:
    id: str
    area: str
    given: str  # the bad input, as the doc shows it
    expect: str  # a regular expression the error message must match
    run: Callable[[Path], str]  # returns the error message; fails the test if the input is accepted


class Accepted(AssertionError):
    """The input went through where it must have been refused."""


def _error(fn, *errors) -> str:
    try:
        fn()
    except errors as exc:
        return str(exc)
    raise Accepted("accepted")


# ---------------------------------------------------------------------- layers


def _ingest(name: str, content: bytes | str, *, discussion: str | None = "d", fmt: str | None = None, max_chars=100_000):
    """What `engram ingest` does before anything is appended: parse the file, prepare every write."""

    def run(tmp: Path) -> str:
        from engram.memory.ingest.formats import IngestError, parse_file
        from engram.memory.ingest.messages import MessageRejected, discussion_write

        path = tmp / name
        path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8", "surrogatepass"))

        def prepare():
            for conv in parse_file(path, discussion=discussion, fmt=fmt, now_us=NOW):
                discussion_write(AGENT_OK, conv.discussion, conv.messages, max_message_chars=max_chars)

        return _error(prepare, IngestError, MessageRejected).replace(str(tmp) + "/", "")

    return run


def _message(**fields):
    """A message given through the Python API (`Engram.append_messages`)."""

    def run(tmp: Path) -> str:
        from engram.memory.ingest.messages import IncomingMessage, MessageRejected, discussion_write

        values = {"role": "user", "content": "hello", "ts_us": NOW, **fields}
        return _error(lambda: discussion_write(AGENT_OK, "d", [IncomingMessage(**values)], max_message_chars=100),
                      MessageRejected)

    return run


def _id(kind: str, value):
    def run(tmp: Path) -> str:
        from engram.kernel.ids import InvalidIdError, validate_agent, validate_discussion

        return _error(lambda: (validate_agent if kind == "agent" else validate_discussion)(value), InvalidIdError)

    return run


def _config(model: str, content: bytes | str):
    def run(tmp: Path) -> str:
        from engram.config.agent import AgentConfig
        from engram.config.discussion import DiscussionSettings
        from engram.config.errors import ConfigError
        from engram.config.loader import load
        from engram.config.service import load_service_config

        names = {"settings": "_DiscussionId-MemoryFile-Workflow-Settings.json", "agent": "agent.config.json",
                 "service": "engram.json"}
        path = tmp / names[model]
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
        if model == "service":
            return _error(lambda: load_service_config(tmp), ConfigError).replace(str(tmp) + "/", "")
        cls = DiscussionSettings if model == "settings" else AgentConfig
        return _error(lambda: load(cls, path), ConfigError).replace(str(tmp) + "/", "")

    return run


def _agent_settings_via_api(settings: dict):
    """Settings that arrive as data (the API), not as a file: the log refuses what its folds cannot parse."""

    def run(tmp: Path) -> str:
        from engram.events.control import SettingsChanged
        from engram.events.envelope import NewEvent, Write
        from engram.events.store import AppendError, EventStore

        store = EventStore(tmp / "log.duckdb")
        try:
            event = SettingsChanged(scope="agent", name="agent.config.json", settings=settings, content_hash="x")
            message = _error(lambda: store.append_many([Write("agent:a", "a", (NewEvent(event, NOW),))]), AppendError)
            assert store.head() == 0, "something was appended"
            return message
        finally:
            store.close()

    return run


def _event(make, *, stream="d", agent="a", ts_us=NOW, event_id=None, max_payload_bytes=1 << 20):
    def run(tmp: Path) -> str:
        from engram.events.envelope import NewEvent, Write
        from engram.events.store import AppendError, EventStore

        store = EventStore(tmp / "log.duckdb", max_payload_bytes=max_payload_bytes)
        try:
            write = Write(stream, agent, (NewEvent(make(), ts_us, event_id),))
            message = _error(lambda: store.append_many([write]), AppendError)
            assert store.head() == 0, "something was appended"
            return message
        finally:
            store.close()

    return run


def _workflow(content: bytes | str):
    def run(tmp: Path) -> str:
        from engram.memory.discussion.workflow.parse import WorkflowError, load

        path = tmp / "flow.json"
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
        return _error(lambda: load(path), WorkflowError).replace(str(tmp) + "/", "")

    return run


def _search(text: str, **kw):
    def run(tmp: Path) -> str:
        from engram.memory.discussion import search as vsearch

        return _error(lambda: vsearch.search(None, text, discussion="d", **kw), vsearch.SearchError)

    return run


def _sql(query: str):
    def run(tmp: Path) -> str:
        from engram.config.home import ProjectionPaths
        from engram.sql import HomeFiles, SqlError, run_readonly

        from engram.events.store import EventStore

        log = tmp / "log" / "shard-000.duckdb"
        EventStore(log).close()
        source = HomeFiles({0: log}, ProjectionPaths(tmp / "projections"))
        return _error(lambda: run_readonly(query, source, timeout_s=10), SqlError)

    return run


def _append(*, also: str | None = None, **fields):
    """An append request of one message (`fields` its ts, message_id…), and a second one with the same fields and
    the words `also` when given."""
    import msgspec

    from engram.api import types as t

    words = ["I live in Porto."] + ([also] if also is not None else [])
    return msgspec.convert({"messages": [{"role": "user", "content": w, **fields} for w in words]}, t.AppendRequest)


def _api(call, *, agents: tuple[str, ...] = ()):
    """An operation of the API (`engram.api.Api`, what the server, the CLI and the clients call) over the in-process
    runtime of a home whose log knows `agents`; the refusal's message, and nothing recorded by it."""

    def run(tmp: Path) -> str:
        from engram.api.errors import ApiError
        from engram.api.service import Api
        from engram.config.service import load_service_config
        from engram.events.envelope import NewEvent, Write
        from engram.runtime.inprocess import InProcessRuntime
        from tests.events.helpers import msg

        home = tmp / "home"
        home.mkdir(exist_ok=True)
        api = Api(InProcessRuntime(load_service_config(home), groups=[], wall_clock=False, auto_settle=False).start())
        try:
            if agents:
                api.rt.append([Write(f"d-{a}", a, (NewEvent(msg(1), NOW, f"m-{a}"),)) for a in agents])
            head = api.rt.heads()

            def answered():  # as every interface answers it: a domain refusal translated (engram.api.errors)
                from engram.api.errors import translate

                try:
                    call(api)
                except ApiError:
                    raise
                except Exception as exc:
                    refused = translate(exc)
                    if refused is None:
                        raise
                    raise refused from None

            message = _error(answered, ApiError)
            assert api.rt.heads() == head, "something was appended"
            return message.replace(str(home), "<home>")
        finally:
            api.close()

    return run


def _cli(args: list[str], files: dict[str, bytes | str] | None = None):
    """`engram ...` in this process: exit code 2, one line on stderr, and the home left byte-identical."""

    def run(tmp: Path) -> str:
        import contextlib
        import io

        from engram.cli.main import main

        home = tmp / "home"
        home.mkdir(exist_ok=True)
        for name, content in (files or {}).items():
            (tmp / name).write_bytes(content if isinstance(content, bytes) else content.encode())
        before = _tree(home)
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            code = main(["--home", str(home), *[a.replace("{tmp}", str(tmp)) for a in args]])
        if code == 0:
            raise Accepted("exit code 0")
        assert code == 2, f"exit code {code}: {err.getvalue()}"
        assert _tree(home) == before, "the home changed"
        lines = [line for line in err.getvalue().splitlines() if line.strip()]
        return " / ".join(lines).replace(str(tmp) + "/", "")

    return run


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _jsonl(*lines: dict | str) -> str:
    return "".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines)


def _locomo(turn: dict | None = None, date: str = "1:56 pm on 8 May, 2023", sample_id: str = "conv-1", **conv) -> str:
    conversation = {"speaker_a": "Ann", "speaker_b": "Bob", "session_1_date_time": date,
                    "session_1": [turn or {"speaker": "Ann", "dia_id": "D1:1", "text": "Hi Bob!"}], **conv}
    return json.dumps([{"sample_id": sample_id, "conversation": conversation}])


MSG = {"role": "user", "content": "hi"}
DEEP = "[" * 200_000 + "]" * 200_000

# ---------------------------------------------------------------------- the catalogue

CASES: list[Case] = [
    # Ids: validated before they touch a path.
    Case("id-separator", "ids", "agent id `ana/../../etc`", r"contains a path separator", _id("agent", "ana/../../etc")),
    Case("id-dotdot", "ids", "discussion id `..`", r"contains '\.\.'", _id("discussion", "..")),
    Case("id-dot", "ids", "discussion id `.hidden`", r"starts with a dot", _id("discussion", ".hidden")),
    Case("id-long", "ids", "agent id of 129 characters", r"129 characters long; the limit is 128", _id("agent", "a" * 129)),
    Case("id-control", "ids", "discussion id with a BEL character", r"control character", _id("discussion", "a\x07b")),
    Case("id-empty", "ids", "empty agent id", r"agent id is empty", _id("agent", "")),
    Case("id-space", "ids", "discussion id `trip 2024`", r"contains ' '; allowed are letters", _id("discussion", "trip 2024")),
    Case("id-type", "ids", "agent id `123` (a number, through the API)", r"must be a string, got int", _id("agent", 123)),
    # Messages in files (`engram ingest`).
    Case("openai-part-text", "messages", "OpenAI content part `{\"type\":\"text\",\"text\":123}`",
         r"\[0\]\.content\[0\]\.text: Expected `str \| null`, got `int`",
         _ingest("c.json", json.dumps([{"role": "user", "content": [{"type": "text", "text": 123}]}]))),
    Case("openai-deep", "messages", "JSON nested 200,000 deep", r"Expected `object`, got `array`|nested too deeply",
         _ingest("deep.json", DEEP)),
    Case("jsonl-deep", "messages", "a JSONL content nested 200,000 deep",
         r"Expected `object`, got `array`|nested too deeply", _ingest("deep.jsonl", '{"role":"user","content":' + DEEP + "}\n")),
    Case("ts-nan", "messages", "`\"ts\": NaN`", r"JSON is malformed", _ingest("m.jsonl", '{"role":"user","content":"x","ts":NaN}\n')),
    Case("ts-infinity", "messages", "`\"ts\": Infinity`", r"JSON is malformed",
         _ingest("m.jsonl", '{"role":"user","content":"x","ts":Infinity}\n')),
    Case("ts-1e20", "messages", "`\"ts\": 1e20` (seconds)", r"timestamp 1e\+20 is outside 1900-01-01T00:00:00Z \.\. 2200",
         _ingest("m.jsonl", _jsonl({**MSG, "ts": 1e20}))),
    Case("ts-minus-1e12", "messages", "`\"ts\": -1e12` (finding 8)", r"timestamp -1000000000000\.0 is outside 1900",
         _ingest("m.jsonl", _jsonl({**MSG, "ts": -1e12}))),
    Case("ts-ms", "messages", "`\"ts\": 1714557600000` (milliseconds, not seconds)", r"is outside 1900",
         _ingest("m.jsonl", _jsonl({**MSG, "ts": 1714557600000}))),
    Case("ts-text", "messages", "`\"ts\": \"yesterday\"`", r"not ISO-8601", _ingest("m.jsonl", _jsonl({**MSG, "ts": "yesterday"}))),
    Case("ts-bool", "messages", "`\"ts\": true`", r"Expected `int \| float \| str \| null`, got `bool`",
         _ingest("m.jsonl", _jsonl({**MSG, "ts": True}))),
    Case("surrogate", "messages", "content `\"\\ud800\"` (a lone surrogate)", r"lone surrogate",
         _ingest("m.jsonl", '{"role":"user","content":"a \\ud800 b"}\n')),
    Case("surrogate-openai", "messages", "OpenAI content `\"\\udc00 x\"`", r"lone surrogate",
         _ingest("m.json", '[{"role":"user","content":"\\udc00 x"}]')),
    Case("metadata-2mb", "messages", "2 MB of metadata", r"metadata of 2000004 characters, over the limit of 16384",
         _ingest("m.jsonl", _jsonl({**MSG, "metadata": {"blob": "x" * 2_000_000}}))),
    Case("metadata-nested", "messages", "metadata value that is an object",
         r"metadata\[\.\.\.\]: Expected `bool \| int \| float \| str \| null`, got `object`",
         _ingest("m.jsonl", _jsonl({**MSG, "metadata": {"a": {"b": 1}}}))),
    Case("jsonl-discussion-list", "messages", "JSONL `\"discussion\": [\"a\"]`", r"discussion: Expected `str \| null`, got `array`",
         _ingest("m.jsonl", _jsonl({**MSG, "discussion": ["a"]}), discussion=None)),
    Case("jsonl-unknown-key", "messages", "JSONL key `contnet`", r"unknown key\(s\) \['contnet'\]",
         _ingest("m.jsonl", _jsonl({"role": "user", "content": "x", "contnet": "y"}))),
    Case("jsonl-missing-content", "messages", "JSONL line without `content`", r"missing 'content'",
         _ingest("m.jsonl", _jsonl({"role": "user"}))),
    Case("jsonl-not-object", "messages", "JSONL line `[1, 2]`", r"must be a JSON object", _ingest("m.jsonl", "[1, 2]\n")),
    Case("jsonl-name-int", "messages", "`\"name\": 123` (finding 8's first poison)", r"name: Expected `str \| null`, got `int`",
         _ingest("m.jsonl", _jsonl({**MSG, "name": 123}))),
    Case("openai-name-int", "messages", "OpenAI `[{\"role\":\"user\",\"content\":\"hi\",\"name\":123}]`",
         r"\[0\]\.name: Expected `str \| null`, got `int`", _ingest("m.json", json.dumps([{**MSG, "name": 123}]))),
    Case("role-unknown", "messages", "role `robot`", r"role 'robot' is not one of assistant, system, tool, user",
         _ingest("m.jsonl", _jsonl({"role": "robot", "content": "beep"}))),
    Case("openai-not-list", "messages", "an OpenAI file that is the string `\"hello\"`", r"Expected `object \| array`, got `str`",
         _ingest("m.json", '"hello"')),
    Case("file-not-utf8", "messages", "a file with invalid UTF-8 (byte 0xff)", r"m\.jsonl:byte 26: not UTF-8 text",
         _ingest("m.jsonl", b'{"role":"user","content":"\xff"}\n')),
    Case("file-empty", "messages", "an empty JSONL file", r"no messages in the file", _ingest("m.jsonl", "\n\n")),
    Case("no-discussion", "messages", "OpenAI chat without a `[DiscussionId]` tag or `--discussion`", r"no discussion id",
         _ingest("m.json", json.dumps([MSG]), discussion=None)),
    Case("tag-conflict", "messages", "`--discussion b` with a `[DiscussionId]a[/DiscussionId]` tag",
         r"--discussion 'b' differs from the \[DiscussionId\] tag 'a'",
         _ingest("m.json", json.dumps([{"role": "user", "content": "[DiscussionId]a[/DiscussionId] hi"}]), discussion="b")),
    Case("tag-bad-id", "messages", "tag `[DiscussionId]../x[/DiscussionId]`", r"contains a path separator",
         _ingest("m.json", json.dumps([{"role": "user", "content": "[DiscussionId]../x[/DiscussionId] hi"}]), discussion=None)),
    Case("message-too-long", "messages", "a message over `limits.maxMessageChars`", r"11 characters, over the limit of 10",
         _ingest("m.jsonl", _jsonl({"role": "user", "content": "y" * 11}), max_chars=10)),
    Case("message-id-long", "messages", "a message id of 300 characters", r"message id must be text of at most 256",
         _ingest("m.jsonl", _jsonl({**MSG, "message_id": "m" * 300}))),
    Case("name-long", "messages", "a speaker name of 300 characters", r"name must be text of at most 256",
         _ingest("m.jsonl", _jsonl({**MSG, "name": "n" * 300}))),
    Case("api-ts-range", "messages", "API message with `ts_us` in the year 30,000", r"event time .* is outside 1900",
         _message(ts_us=10**18)),
    Case("api-content-type", "messages", "API message whose content is a list", r"content must be text, got list",
         _message(content=["a"])),
    Case("api-surrogate", "messages", "API message with a lone surrogate", r"not valid Unicode", _message(content="\ud83d")),
    # LoCoMo.
    Case("locomo-text-null", "LoCoMo", "a turn with `\"text\": null`", r"session_1:\[0\]\.text: Expected `str`, got `null`",
         _ingest("l.json", _locomo({"speaker": "Ann", "dia_id": "D1:1", "text": None}), discussion=None)),
    Case("locomo-30-february", "LoCoMo", "session date `\"1:56 pm on 30 February, 2023\"`", r"is not a date: day is out of range",
         _ingest("l.json", _locomo(date="1:56 pm on 30 February, 2023"), discussion=None)),
    Case("locomo-99-56", "LoCoMo", "session date `\"99:56 pm on 8 May, 2023\"` (was stored as 15:56)",
         r"99:56 is not a time of a 12-hour clock", _ingest("l.json", _locomo(date="99:56 pm on 8 May, 2023"), discussion=None)),
    Case("locomo-date-words", "LoCoMo", "session date `\"sometime in May\"`", r"is not like '1:56 pm on 8 May, 2023'",
         _ingest("l.json", _locomo(date="sometime in May"), discussion=None)),
    Case("locomo-no-date", "LoCoMo", "a session without its date", r"session_1_date_time: missing",
         _ingest("l.json", json.dumps([{"sample_id": "c", "conversation": {"session_1": [{"speaker": "A", "dia_id": "D1:1",
                                                                                          "text": "x"}]}}]), discussion=None)),
    Case("locomo-sample-id", "LoCoMo", "`sample_id` `\"../c\"`", r"\[0\]\.sample_id: discussion id '\.\./c' contains a path separator",
         _ingest("l.json", _locomo(sample_id="../c"), discussion=None)),
    Case("locomo-discussion", "LoCoMo", "a LoCoMo file with `--discussion`", r"do not pass --discussion",
         _ingest("l.json", _locomo(), discussion="d")),
    Case("locomo-no-dia-id", "LoCoMo", "a turn without `dia_id`", r"missing 'dia_id'",
         _ingest("l.json", _locomo({"speaker": "Ann", "text": "hi"}), discussion=None)),
    # Discussion settings (_DiscussionId-MemoryFile-Workflow-Settings.json).
    Case("settings-typo", "settings", "key `chunkEstimatedTokenSise`", r"unknown key 'chunkEstimatedTokenSise'; did you mean 'chunkEstimatedTokenSize'",
         _config("settings", '{"chunkEstimatedTokenSise": 500}')),
    Case("settings-bool-string", "settings", "`\"useVectorForQualityMemory\": \"false\"`", r"must be true or false, not 'false'",
         _config("settings", '{"useVectorForQualityMemory": "false"}')),
    Case("settings-bool-number", "settings", "`\"useVectorForQualityMemory\": 0`", r"must be true or false, not 0",
         _config("settings", '{"useVectorForQualityMemory": 0}')),
    Case("settings-zero", "settings", "`\"chunkEstimatedTokenSize\": 0`", r"Input should be greater than 0",
         _config("settings", '{"chunkEstimatedTokenSize": 0}')),
    Case("settings-not-utf8", "settings", "the file with invalid UTF-8", r"byte 17: not UTF-8 text",
         _config("settings", b'{"systemPrompt":"\xfe"}')),
    Case("settings-infinity", "settings", "`\"chunkEstimatedTokenSize\": Infinity`", r"Infinity is not a JSON number",
         _config("settings", '{"chunkEstimatedTokenSize": Infinity}')),
    Case("settings-list", "settings", "a file that is a JSON list", r"the top level must be a JSON object, got list",
         _config("settings", "[]")),
    Case("settings-comment", "settings", "an unterminated `/*` comment", r"unterminated /\* comment",
         _config("settings", '{"prompt": "x" /* oops\n}')),
    # Agent configuration (agents/<agent>/agent.config.json).
    Case("agent-infinity", "agent config", "`\"recencyHalfLifeHours\": Infinity` (finding 8)", r"Infinity is not a JSON number",
         _config("agent", '{"memory": {"decay": {"recencyHalfLifeHours": Infinity}}}')),
    Case("agent-infinity-api", "agent config", "settings with `recencyHalfLifeHours` = inf given as data (API)",
         r"memory\.decay\.recencyHalfLifeHours is not a finite number",
         _agent_settings_via_api({"memory": {"decay": {"recencyHalfLifeHours": float("inf")}}})),
    Case("agent-trait", "agent config", "`\"personality\": {\"openness\": 1.5}`", r"less than or equal to 1",
         _config("agent", '{"personality": {"openness": 1.5}}')),
    Case("agent-bool", "agent config", "`\"storage\": {\"autoIngest\": {\"enabled\": 1}}`", r"must be true or false, not 1",
         _config("agent", '{"storage": {"autoIngest": {"enabled": 1}}}')),
    Case("agent-typo", "agent config", "key `memroy`", r"unknown key 'memroy'; did you mean 'memory'",
         _config("agent", '{"memroy": {}}')),
    Case("agent-not-utf8", "agent config", "the file with invalid UTF-8", r"not UTF-8 text", _config("agent", b"{\"x\": \"\xc3\x28\"}")),
    Case("agent-slots", "agent config", "`\"workingMemory\": {\"capacity\": 12}`", r"less than or equal to 9",
         _config("agent", '{"memory": {"workingMemory": {"capacity": 12}}}')),
    # Service configuration (engram.json).
    Case("service-numcpus", "service config", "`\"ray\": {\"numCpus\": -1}`", r"ray\.numCpus: Input should be greater than or equal to 1",
         _config("service", '{"ray": {"numCpus": -1}}')),
    Case("service-shards", "service config", "`\"shards\": 0`", r"shards: Input should be greater than or equal to 1",
         _config("service", '{"shards": 0}')),
    Case("service-pool", "service config", "`\"ray\": {\"pools\": {\"sumarizer\": 2}}`", r"unknown policy group\(s\) sumarizer",
         _config("service", '{"ray": {"pools": {"sumarizer": 2}}}')),
    Case("service-processes", "service config", "`\"ray\": {\"processes\": [[\"observer\", \"contxt\"]]}`",
         r"unknown policy group\(s\) contxt", _config("service", '{"ray": {"processes": [["observer", "contxt"]]}}')),
    Case("service-not-utf8", "service config", "engram.json with invalid UTF-8", r"engram\.json: byte 1: not UTF-8 text",
         _config("service", b"{\x80}")),
    Case("service-limit", "service config", "`\"limits\": {\"maxMessageChars\": 0}`", r"greater than 0",
         _config("service", '{"limits": {"maxMessageChars": 0}}')),
    Case("service-bool", "service config", "`\"llm\": {\"endpoints\": {\"default\": {\"promptCaching\": \"yes\"}}}`",
         r"must be true or false, not 'yes'", _config("service", '{"llm": {"endpoints": {"default": {"promptCaching": "yes"}}}}')),
    # Workflow JSON.
    Case("workflow-node-type", "workflow", "node type `QualityMemroy`", r"unknown node type 'QualityMemroy'; did you mean 'QualityMemory'",
         _workflow('[{"type": "QualityMemroy"}]')),
    Case("workflow-node-not-object", "workflow", "a node that is the string `\"x\"`", r"a node is a JSON object, got str",
         _workflow('["x"]')),
    Case("workflow-empty", "workflow", "`[]`", r"the workflow has no nodes", _workflow("[]")),
    Case("workflow-two-locks", "workflow", "two `WorkflowLock` nodes", r"more than one WorkflowLock",
         _workflow('[{"type": "WorkflowLock"}, {"type": "WorkflowLock"}]')),
    Case("workflow-reference", "workflow", "a prompt naming `{agent9Output}` in a 1-node workflow",
         r"\{agent9Output\} in prompt refers to a node that runs later",
         _workflow('[{"type": "Standard", "prompt": "{agent9Output}"}]')),
    Case("workflow-not-utf8", "workflow", "a workflow file with invalid UTF-8", r"byte 9: not UTF-8 text",
         _workflow(b'[{"type":\xff}]')),
    # Keyword searches (VectorMemorySearch).
    Case("search-no-keywords", "search", "keywords `\";;  ;\"`", r"no keywords: give them separated by ';'", _search(";;  ;")),
    Case("search-mode", "search", "mode `semantc`", r"unknown search mode 'semantc'; did you mean 'semantic'",
         _search("Lisbon", mode="semantc")),
    Case("search-limit", "search", "`--limit 0`", r"limit must be at least 1, got 0", _search("Lisbon", limit=0)),
    # SQL (engram sql, the API's read-only SQL).
    Case("sql-empty", "SQL", "`engram sql ''`", r"empty query", _sql("")),
    Case("sql-delete", "SQL", "`DELETE FROM log_000.events`", r"DELETE statements are not allowed", _sql("DELETE FROM log_000.events")),
    Case("sql-detach-attach", "SQL", "`DETACH log_000; ATTACH '<log>' AS rw; DELETE FROM rw.events` (finding 1)",
         r"3 statements given", _sql("DETACH log_000; ATTACH 'x.duckdb' AS rw; DELETE FROM rw.events")),
    Case("sql-copy", "SQL", "`COPY (SELECT 1) TO '/tmp/x.csv'`", r"COPY statements are not allowed", _sql("COPY (SELECT 1) TO '/tmp/x.csv'")),
    Case("sql-attach", "SQL", "`ATTACH '/tmp/new.duckdb' AS n`", r"ATTACH statements are not allowed", _sql("ATTACH '/tmp/new.duckdb' AS n")),
    Case("sql-install", "SQL", "`INSTALL httpfs`", r"not allowed: engram SQL is read-only", _sql("INSTALL httpfs")),
    Case("sql-read-text", "SQL", "`SELECT * FROM read_text('/etc/hostname')`", r"Permission Error: Cannot access file",
         _sql("SELECT * FROM read_text('/etc/hostname')")),
    Case("sql-set", "SQL", "`SET enable_external_access = true`", r"SET statements are not allowed", _sql("SET enable_external_access = true")),
    Case("sql-pragma", "SQL", "`PRAGMA enable_profiling`", r"PRAGMA statements are not allowed", _sql("PRAGMA enable_profiling")),
    Case("sql-syntax", "SQL", "`SELEC 1`", r"Parser Error: syntax error", _sql("SELEC 1")),
    Case("sql-unknown-table", "SQL", "`SELECT * FROM nope`", r"Table with name nope does not exist", _sql("SELECT * FROM nope")),
    # The log (every event, whichever way it came).
    Case("log-ts-1e26", "log", "an event at `ts` = 10^26 s (finding 9's bad writer)", r"event time .* µs is outside 1900-01-01",
         _event(lambda: __import__("tests.events.helpers", fromlist=["msg"]).msg(1), ts_us=10**32)),
    Case("log-payload", "log", "an event of 2 MB", r"MessageAppended for stream 'd' is \d+ bytes; the limit is 1048576",
         _event(lambda: __import__("tests.events.helpers", fromlist=["msg"]).msg(1, "z" * 2_000_000))),
    Case("log-other-agent", "log", "a write to stream `agent:bo` as agent `ana`", r"another agent's stream",
         _event(lambda: __import__("tests.events.helpers", fromlist=["msg"]).msg(1), stream="agent:bo", agent="ana")),
    Case("log-event-id", "log", "an event id of 600 characters", r"event id must be 1-512 characters",
         _event(lambda: __import__("tests.events.helpers", fromlist=["msg"]).msg(1), event_id="e" * 600)),
    # Reads for an agent that does not exist.
    Case("recall-typo", "agents", "`recall --agent anaa` (no such agent)",
         r"agent 'anaa' is not known \(no events, no agent.config.json\)",
         _api(lambda api: api.recall("anaa", __import__("engram.api.types", fromlist=["t"]).RecallRequest(query="x")),
              agents=("ana", "bo"))),
    Case("api-future-ts", "messages", "`\"ts\": \"2199-01-01T00:00:00Z\"` (later than the server's clock plus "
         "`limits.maxFutureSeconds`, a day)", r"^discussion d: message 1: time 2199-01-01T00:00:00Z is more than 86400 s after this "
         r"server's clock", _api(lambda api: api.append_messages("ana", "d", _append(ts="2199-01-01T00:00:00Z")))),
    Case("api-message-id-reused", "messages", "two messages with id `m-1` and other words (once recorded, the same id "
         "with other words is 409 `conflict`)", r"^discussion d: message 2 \(m-1\): message id 'm-1' is message 1's "
         r"too, with other words", _api(lambda api: api.append_messages("ana", "d", _append(message_id="m-1",
                                                                                            also="other words")))),
    Case("api-sql-blank", "SQL", "`engram sql '   '` (the API's SQL operation)", r"^the query is empty$",
         _api(lambda api: api.run_sql(__import__("engram.api.types", fromlist=["t"]).SqlRequest(query="   ")))),
    Case("api-sql-write", "SQL", "`engram sql 'DELETE FROM events'` (the API's SQL operation)",
         r"^DELETE statements are not allowed: engram SQL is read-only",
         _api(lambda api: api.run_sql(__import__("engram.api.types", fromlist=["t"]).SqlRequest(query="DELETE FROM events")),
              agents=("ana",))),
    # The command line, in this process: exit 2, one line, the home byte-identical.
    Case("cli-ingest-poison", "CLI", "`engram ingest m.jsonl` with `\"name\": 123`",
         r"^engram: error: m\.jsonl:1:name: Expected `str \| null`, got `int`; nothing of m\.jsonl was appended",
         _cli(["ingest", "{tmp}/m.jsonl", "--discussion", "d"], {"m.jsonl": _jsonl({**MSG, "name": 123})})),
    Case("cli-agent", "CLI", "`engram ingest chat.json --agent ../x`", r"^engram: error: agent id '\.\./x' contains a path separator",
         _cli(["ingest", "{tmp}/chat.json", "--agent", "../x"], {"chat.json": json.dumps([MSG])})),
    Case("cli-regenerate-settings-not-utf8", "CLI", "`engram regenerate --settings s.json`, the file not UTF-8",
         r"^engram: error: s\.json: byte 0: not UTF-8 text",
         _cli(["regenerate", "--discussion", "d", "--settings", "{tmp}/s.json"], {"s.json": b"\xff{}"})),
]


def render() -> str:
    """docs/bad-input.md: the catalogue with the message engram gives for each row (paths shown relative)."""
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n, case in enumerate(CASES, 1):
            folder = Path(tmp) / case.id
            folder.mkdir()
            message = case.run(folder)
            shown = message if len(message) <= 220 else message[:217] + "…"
            shown = shown.replace("|", "\\|").replace("\n", " ")
            rows.append(f"| {n} | `{case.id}` | {case.area} | {case.given.replace('|', chr(92) + '|')} | {shown} |")
    head = [
        "# Bad input: the catalogue",
        "",
        "Every row is an input a user (or an attacker) can give, refused by the layer that owns its validation with",
        "the message below; nothing is appended, and a command exits with code 2. Each row is one test",
        "(`tests/reliability/test_bad_inputs.py`, cases in `tests/reliability/bad_inputs.py`); this file is rendered",
        "from the same cases (`.venv/bin/python -m tests.reliability.bad_inputs > docs/bad-input.md`), and a test",
        "checks that it is current.",
        "",
        "| # | case | area | bad input | what engram says |",
        "|---|---|---|---|---|",
    ]
    return "\n".join(head + rows) + "\n"


if __name__ == "__main__":
    sys.stdout.write(render())
