"""A text front end's templated transcript read back into its messages (`engram.memory.ingest.transcript`)."""

from __future__ import annotations

from engram.memory.ingest.transcript import turns

CHAT = [("system", "You are Ada. [DiscussionId]t[/DiscussionId]"), ("user", "Hi"), ("assistant", "Hello!"),
        ("user", "Where is Alfama?")]


def chatml(messages) -> str:
    return "".join(f"<|im_start|>{r}\n{c}<|im_end|>\n" for r, c in messages) + "<|im_start|>assistant\n"


def llama3(messages) -> str:
    body = "".join(f"<|start_header_id|>{r}<|end_header_id|>\n\n{c}<|eot_id|>" for r, c in messages)
    return "<|begin_of_text|>" + body + "<|start_header_id|>assistant<|end_header_id|>\n\n"


def gemma(messages) -> str:
    return "".join(f"<start_of_turn>{'model' if r == 'assistant' else r}\n{c}<end_of_turn>\n" for r, c in messages
                   if r != "system") + "<start_of_turn>model\n"


def test_chatml_llama3_and_gemma_transcripts_read_back_into_their_messages_without_the_open_turn():
    assert turns(chatml(CHAT)) == CHAT
    assert turns(llama3(CHAT)) == CHAT
    assert turns(gemma(CHAT)) == CHAT[1:]


def test_an_open_assistant_turn_with_a_prefix_is_not_a_message():
    assert turns(chatml(CHAT) + "Sure,") == CHAT


def test_plain_text_and_a_template_without_a_user_turn_are_not_transcripts():
    assert turns("Once upon a time") is None
    assert turns("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>assistant\n") is None
