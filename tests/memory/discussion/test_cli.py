"""The commands on real Ray actors: a WilmerAI user's path from chat file to files, search,
delete-and-replay and regeneration."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engram.cli.main import main

pytestmark = pytest.mark.server

WORKFLOW = Path("engram/samples/wilmer-memory-chat.workflow.json").resolve()


def chat_file(path: Path) -> Path:
    turns = [{"role": "system", "content": "[DiscussionId]chat-42[/DiscussionId] You are a travel assistant."},
             {"role": "user", "content": "[DiscussionId]chat-43[/DiscussionId]"}]  # a later tag loses; the message is empty
    topics = ["Lisbon trip in May", "budget of 2000 euros", "vegetarian food tours", "a day trip to Sintra",
              "the Oceanarium", "fado music at night", "tram 28", "pasteis de nata", "the Belem tower", "a hotel in Alfama"]
    for i, topic in enumerate(topics):
        turns.append({"role": "user", "content": f"I would like to plan {topic}. What do you suggest?"})
        turns.append({"role": "assistant", "content": f"For {topic}, I suggest booking early and checking reviews."})
    path.write_text(json.dumps(turns))
    return path


def cli(capsys, *argv) -> tuple[int, str]:
    code = main(list(argv))
    return code, capsys.readouterr().out


@pytest.mark.ray
def test_a_wilmer_user_runs_the_guide_workflow_then_finds_searches_deletes_and_replays_the_files(
        ray_session, home_dir, tmp_path, capsys):
    from engram.config.service import load_service_config
    from engram.boot.embedded import Engram
    from engram.runtime.ray_runtime import RayRuntime
    from tests.server.helpers import Served

    with Engram(RayRuntime(load_service_config(home_dir)).start()) as mem, Served(mem):
        wilmer_user(str(home_dir), home_dir, tmp_path, capsys)


def wilmer_user(home: str, home_dir: Path, tmp_path: Path, capsys) -> None:
    code, out = cli(capsys, "--home", home, "workflow", "run", str(WORKFLOW), "--messages", str(chat_file(tmp_path / "chat.json")))
    assert code == 0, out
    assert "21 new message(s) appended to discussion 'chat-42'" in out  # the first tag wins; the tag-only message is dropped
    assert "response (" in out and "QualityMemory" in out

    code, out = cli(capsys, "--home", home, "memories", "show", "chat-42", "--json")
    memories = json.loads(out)
    assert code == 0 and [m["message_count"] for m in memories] == [5, 5, 5]
    assert all("[DiscussionId]" not in m["summary"] for m in memories)

    code, out = cli(capsys, "--home", home, "summary", "show", "chat-42", "--json")
    assert code == 0 and json.loads(out)["memories_absorbed"] == 3

    code, out = cli(capsys, "--home", home, "search", "Sintra;Oceanarium", "--discussion", "chat-42", "--json", "--mode", "keyword")
    result = json.loads(out)
    found = [" ".join([h["title"], h["summary"], *h["entities"], *h["key_phrases"]]) for h in result["hits"]]
    assert code == 0 and found and all("Sintra" in text or "Oceanarium" in text for text in found)
    assert {h["message_ids"][0] for h in result["hits"]} <= {m["message_ids"][0] for m in memories}

    public = home_dir / "projections" / "agents" / "default" / "Public"
    saved = {p.name: p.read_bytes() for p in public.iterdir()}
    assert sorted(saved) == ["chat-42_memories.jsonl", "chat-42_summary.jsonl", "chat-42_vector_memory.db"]
    for p in public.iterdir():
        p.unlink()
    code, out = cli(capsys, "--home", home, "replay", "--discussion", "chat-42")
    assert code == 0 and out.count("restored (it was missing)") == 3 and "no LLM call" in out
    assert (public / "chat-42_memories.jsonl").read_bytes() == saved["chat-42_memories.jsonl"]
    assert (public / "chat-42_summary.jsonl").read_bytes() == saved["chat-42_summary.jsonl"]
    code, out = cli(capsys, "--home", home, "replay", "--discussion", "chat-42", "--verify")
    assert code == 0 and out.count("identical to the log's") == 3

    settings = tmp_path / "consolidate.json"
    settings.write_text('{\n  // fewer, larger chunks\n  "chunkEstimatedTokenSize": 100\n}')
    code, out = cli(capsys, "--home", home, "regenerate", "--discussion", "chat-42", "--settings", str(settings))
    assert code == 0 and "generation 1 supersedes generation 0" in out
    code, out = cli(capsys, "--home", home, "memories", "show", "chat-42", "--json")
    regenerated = json.loads(out)
    assert {(m["generation"], m["mode"], m["trigger"]) for m in regenerated} == {(1, "consolidation", "tokens")}
    assert regenerated and all(m["token_count"] >= 100 for m in regenerated)  # only the token threshold cut them
    covered = [i for m in regenerated for i in m["message_ids"]]
    assert covered == [i for m in memories for i in m["message_ids"]][: len(covered)]  # the same history, from the start


def test_bad_input_is_a_clear_error_not_a_path(home_dir, tmp_path, capsys):
    from tests.server.helpers import served_home

    with served_home(home_dir):
        bad_input(home_dir, tmp_path, capsys)


def bad_input(home_dir: Path, tmp_path: Path, capsys) -> None:
    assert main(["--home", str(home_dir), "memories", "show", "../../etc"]) == 2
    assert "discussion id '../../etc' contains a path separator" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text('[{"type": "VectorMemorySearch", "input": "x", "limt": 2}]')
    assert main(["--home", str(home_dir), "workflow", "run", str(bad), "--discussion", "d"]) == 2
    assert "unknown key 'limt'; did you mean 'limit'?" in capsys.readouterr().err
    assert main(["--home", str(home_dir), "search", "a", "--discussion", "nothing-here"]) == 2
