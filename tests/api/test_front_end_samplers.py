"""The front end's samplers (temperature, top_p, max_tokens, stop…) reach the reply's model call, and only it; a
preset that says `frontEndSamplers: "override"` wins where it sets a value. No server, no Ray: the workflow engine
and the endpoint layer's request, as the proxy drives them."""

from __future__ import annotations

from engram.config.llm import Endpoint, LlmConfig, Preset
from engram.memory.discussion.workflow import ChatMessage, Responder, RunContext, parse, run
from engram.providers.endpoints.wire import Sampling
from engram.providers.llm import inputs as i
from engram.providers.llm.endpoint_tasks import EndpointTasks
from engram.providers.llm.offline.provider import OfflineTasks
from engram.providers.llm.types import ChatLine

FRONT_END = Sampling(temperature=0.9, top_p=0.5, max_tokens=7, stop=("\nUser:",))


class RecordingTasks(OfflineTasks):
    """The offline provider, recording the samplers each call was given."""

    def __init__(self):
        super().__init__()
        self.seen: list[tuple[str, Sampling | None]] = []

    def run(self, task_input):
        self.seen.append((task_input.task, getattr(task_input, "sampling", None)))
        return super().run(task_input)


def test_only_the_reply_node_gets_the_front_ends_samplers():
    workflow = parse([
        {"id": "draft", "type": "Standard", "prompt": "Draft an answer to {chat_user_prompt_last_one}"},
        {"id": "answer", "type": "Standard", "prompt": "Improve: {draft}", "returnToUser": True},
        {"type": "WorkflowLock", "workflowLockId": "w"},
        {"id": "later", "type": "Standard", "prompt": "A memory of {draft}"},
    ], "w.json")
    tasks = RecordingTasks()
    out = run(workflow, RunContext(discussion=None, messages=[ChatMessage("user", "Where is Alfama?")],
                                   responder=Responder(tasks), sampling=FRONT_END))
    assert out.wait(30)
    assert tasks.seen == [("respond", None), ("respond", FRONT_END), ("respond", None)]


def prepared(preset: Preset):
    config = LlmConfig(endpoints={"default": Endpoint(api_type="openAIChatCompletion", base_url="http://127.0.0.1:9",
                                                      model="m")},
                       presets={"default": preset})
    line = ChatLine(role="user", content="Where is Alfama?", seq=1, ts_us=0)
    return EndpointTasks(config, env={}).prepare(i.Respond(lines=(line,), sampling=FRONT_END)).request


def test_the_front_ends_samplers_win_over_the_preset_by_default():
    request = prepared(Preset(temperature=0.1, top_p=0.2, stop=("###",)))
    assert (request.temperature, request.sampling.top_p, request.sampling.stop, request.max_tokens) == (
        0.9, 0.5, ("\nUser:",), 7)


def test_a_preset_that_overrides_wins_where_it_sets_a_value():
    request = prepared(Preset(temperature=0.1, front_end_samplers="override"))
    assert (request.temperature, request.sampling.top_p, request.sampling.stop) == (0.1, 0.5, ("\nUser:",))
