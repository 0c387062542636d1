"""Reading a workflow: a JSON list of nodes (or WilmerAI's `{"nodes": [...]}`), comments allowed.

Everything is checked before anything runs: node types, keys, ids, and every `{reference}` in a
node's text. A problem is a `WorkflowError` naming the file, the node and the closest valid name.

References a node's `prompt`, `systemPrompt` or `input` may hold:
    {<id>}                        the output of an earlier node with that id
    {agent<N>Output}              the output of the N-th node (WilmerAI's positional name, 1-based)
    {agent<N>Input}               the N-th input a memory workflow is given (see `inputs`)
    {chat_user_prompt_last_one}   the last user message (also _two … _five, _ten, _twenty: the last N)
    {discussion_id}
Text in braces that is not a name (such as JSON in a prompt) is left alone.
"""

from __future__ import annotations

import difflib
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from pydantic import ValidationError

from engram.config import jsonc
from engram.config.errors import explain
from engram.memory.discussion.workflow.nodes import BY_NAME, NODE_TYPES, Node, TEMPLATE_FIELDS

REFERENCE = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_POSITIONAL = re.compile(r"^agent(\d+)(Output|Input)$")
CHAT_COUNTS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "ten": 10, "twenty": 20}
CHAT_VARIABLES = tuple(f"chat_user_prompt_last_{w}" for w in CHAT_COUNTS)
# `chat_system_prompt`: the system prompt the front-end sent (WilmerAI's variable; empty elsewhere).
VARIABLES = CHAT_VARIABLES + ("discussion_id", "chat_system_prompt")


class WorkflowError(ValueError):
    """A workflow that cannot run as written."""


@dataclass(frozen=True)
class Workflow:
    nodes: tuple[Node, ...]
    source: str
    content_hash: str

    @property
    def ids(self) -> list[str]:
        return [node_id(n, i) for i, n in enumerate(self.nodes)]

    def routes(self) -> list[tuple[str, str | None, str | None]]:
        """(where, endpoint name, preset name) of every node that names an endpoint or a preset."""
        out: list[tuple[str, str | None, str | None]] = []
        for i, n in enumerate(self.nodes):
            where = f"node {i + 1} ({n.label()!r})"
            endpoint, preset = getattr(n, "endpoint_name", None), getattr(n, "preset", None)  # not every node type names one
            if endpoint is not None:
                out.append((f"{where} endpointName", endpoint, None))
            if preset is not None:
                out.append((f"{where} preset", None, preset))
        return out


def node_id(node: Node, index: int) -> str:
    """A node's id: its own, else `agent<N>Output` as WilmerAI names outputs."""
    return node.id or f"agent{index + 1}Output"


def output_names(node: Node, index: int) -> tuple[str, ...]:
    """The names later nodes may use for this node's output: its id and its position."""
    positional = f"agent{index + 1}Output"
    return (node.id, positional) if node.id and node.id != positional else (positional,)


def _closest(word: str, options: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, list(options), n=1, cutoff=0.5)
    return f"; did you mean {close[0]!r}?" if close else ""


def parse(data: object, source: str, *, inputs: int = 0) -> Workflow:
    """Validate a workflow given as data. `inputs`: how many `{agent<N>Input}` values it is given."""
    if isinstance(data, dict) and set(data) == {"nodes"}:
        data = data["nodes"]
    if not isinstance(data, list):
        raise WorkflowError(f"{source}: a workflow is a JSON list of nodes (or an object with 'nodes'), got {type(data).__name__}")
    if not data:
        raise WorkflowError(f"{source}: the workflow has no nodes")
    nodes: list[Node] = []
    seen: dict[str, int] = {}
    for i, raw in enumerate(data):
        where = f"{source}: node {i + 1}"
        if not isinstance(raw, dict):
            raise WorkflowError(f"{where}: a node is a JSON object, got {type(raw).__name__}")
        if isinstance(raw.get("id"), str):
            where += f" ({raw['id']!r})"
        kind = raw.get("type")
        if not isinstance(kind, str):
            raise WorkflowError(f"{where}: missing 'type' (one of {', '.join(c.kind for c in NODE_TYPES)})")
        cls = BY_NAME.get(kind.lower())
        if cls is None:
            raise WorkflowError(f"{where}: unknown node type {kind!r}{_closest(kind, [c.kind for c in NODE_TYPES])}")
        try:
            node = cls.model_validate(raw)
        except ValidationError as exc:
            raise WorkflowError(str(explain(exc, cls, f"{where}, {cls.kind}"))) from None
        if node.id is not None:
            if not node.id.strip():
                raise WorkflowError(f"{where}: 'id' is empty")
            if node.id in seen:
                raise WorkflowError(f"{where}: id {node.id!r} is already used by node {seen[node.id] + 1}")
            seen[node.id] = i
        nodes.append(node)
    _check_references(nodes, source, inputs)
    locks = [i for i, n in enumerate(nodes) if n.kind == "WorkflowLock"]
    if len(locks) > 1:
        raise WorkflowError(f"{source}: more than one WorkflowLock (nodes {', '.join(str(i + 1) for i in locks)})")
    digest = hashlib.sha256(repr([n.model_dump(by_alias=True) for n in nodes]).encode()).hexdigest()[:12]
    return Workflow(tuple(nodes), source, digest)


def _check_references(nodes: list[Node], source: str, inputs: int) -> None:
    every_id = {node_id(n, i): i for i, n in enumerate(nodes)}
    for index, node in enumerate(nodes):
        where = f"{source}: node {index + 1}" + (f" ({node.id!r})" if node.id else "")
        known = {name for i, n in enumerate(nodes[:index]) for name in output_names(n, i)} | set(VARIABLES)
        for field in TEMPLATE_FIELDS:
            text = getattr(node, field, None)
            if not isinstance(text, str):
                continue
            for name in REFERENCE.findall(text):
                if name in known:
                    continue
                positional = _POSITIONAL.match(name)
                if positional and positional.group(2) == "Input":
                    if 1 <= int(positional.group(1)) <= inputs:
                        continue
                    raise WorkflowError(f"{where}: {{{name}}}: this workflow is given {inputs} input(s)")
                if name in every_id or (positional and int(positional.group(1)) > index):
                    raise WorkflowError(
                        f"{where}: {{{name}}} in {field} refers to a node that runs later; "
                        "a node can only use the outputs of nodes before it"
                    )
                raise WorkflowError(f"{where}: unknown reference {{{name}}} in {field}{_closest(name, known)}")


def load(path: str | Path, *, inputs: int = 0) -> Workflow:
    path = Path(path)
    return parse(jsonc.load(path, WorkflowError), str(path), inputs=inputs)


def workflow_path(home: Path, name: str) -> Path:
    """Where a named workflow lives: `<home>/workflows/<name>.json`."""
    from engram.kernel.ids import validate_id

    return Path(home) / "workflows" / f"{validate_id(name, 'workflow name')}.json"
