"""Memory workflows: `fileMemoryWorkflowName` / `vectorMemoryWorkflowName` name a workflow that
writes a chunk memory (a text) or the structured JSON of vector memories instead of the built-in prompt.

Such a workflow lives in `<home>/workflows/<name>.json` and may hold `Standard` nodes only (it
runs inside the Summarizer, where no memory node can run). Its inputs, as WilmerAI passes them:

    {agent1Input}  [TextChunk]          the chunk's messages as a transcript
    {agent2Input}  [Memory_file]        the latest chunk memories (file memories only)
    {agent3Input}  [Full_Memory_file]   every chunk memory so far (file memories only)
    {agent4Input}  [Chat_Summary]       the rolling summary (file memories only)

Its response (see `workflow.engine`) is the memory. Its Standard nodes call the endpoint and
preset they name, else the settings' ones (vector memories: `vectorMemoryEndpointName` /
`vectorMemoryPreset`, falling back to `endpointName` / `preset`). A workflow that cannot be used
(missing, invalid, naming an endpoint or preset that is not configured, or, for vector memories,
an answer that is not the JSON asked for) is not fatal: the built-in prompt makes the memory and
the event records why the workflow was not used.
"""

from __future__ import annotations

from pathlib import Path

from engram.kernel.ids import InvalidIdError
from engram.providers.llm.tasks import MemoryTasks
from engram.memory.discussion.summarizer import WorkflowOutcome
from engram.memory.discussion.workflow import engine
from engram.memory.discussion.workflow.nodes import Standard
from engram.memory.discussion.workflow.parse import WorkflowError, load, workflow_path
from engram.memory.discussion.workflow.responder import ChatMessage, Responder

INPUT_ORDER = ("TextChunk", "Memory_file", "Full_Memory_file", "Chat_Summary")


class MemoryWorkflowLibrary:
    def __init__(self, home_root: Path, tasks: MemoryTasks) -> None:
        self.home_root = Path(home_root)
        self.tasks = tasks
        self.responder = Responder(tasks)

    def run(self, name: str, inputs: dict[str, str], *, endpoint_name: str | None = None,
            preset: str | None = None) -> WorkflowOutcome:
        try:
            path = workflow_path(self.home_root, name)
        except InvalidIdError as exc:
            return WorkflowOutcome(None, None, f"workflow name: {exc}")
        if not path.exists():
            return WorkflowOutcome(None, None, f"workflow {name!r} not found at {path}")
        try:
            workflow = load(path, inputs=len(INPUT_ORDER))
        except WorkflowError as exc:
            return WorkflowOutcome(None, None, str(exc))
        tag = f"{name}@{workflow.content_hash}"
        others = sorted({node.kind for node in workflow.nodes if not isinstance(node, Standard)})
        if others:
            return WorkflowOutcome(None, tag, f"{path}: a memory workflow may only hold Standard nodes, not {', '.join(others)}")
        unroutable = self.tasks.unroutable(workflow.routes())
        if unroutable:
            return WorkflowOutcome(None, tag, f"{path}: " + "; ".join(unroutable))
        values = [inputs.get(key, "") for key in INPUT_ORDER]
        ctx = engine.RunContext(
            discussion=None,
            messages=[ChatMessage(role="user", content=inputs.get("TextChunk", ""))],
            responder=self.responder,
            inputs=values,
            bracket_inputs=dict(zip(INPUT_ORDER, values)),
            endpoint_name=endpoint_name,
            preset=preset,
        )
        try:
            result = engine.run(workflow, ctx)
        except Exception as exc:  # a failing LLM node: recorded, and the built-in prompt is used
            return WorkflowOutcome(None, tag, f"workflow {name!r} failed: {exc}")
        llm = next((r.llm for r in reversed(result.results) if r.llm is not None), None)
        if not result.response.strip():
            return WorkflowOutcome(None, tag, f"workflow {name!r} produced no output", llm)
        return WorkflowOutcome(result.response, tag, None, llm)
