"""The workflow engine: a workflow is a JSON list of nodes run in order (see `parse`, `engine`).

Named workflows (`fileMemoryWorkflowName`, `vectorMemoryWorkflowName` in the settings, or
`engram workflow run NAME`) live in `<home>/workflows/<name>.json`.
"""

from engram.memory.discussion.workflow.engine import NodeResult, RunContext, WorkflowRun, run
from engram.memory.discussion.workflow.parse import Workflow, WorkflowError, load, parse, workflow_path
from engram.memory.discussion.workflow.responder import ChatMessage, Responder

__all__ = [
    "ChatMessage", "NodeResult", "Responder", "RunContext", "Workflow", "WorkflowError", "WorkflowRun",
    "load", "parse", "run", "workflow_path",
]
