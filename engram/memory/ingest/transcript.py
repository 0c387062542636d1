"""The conversation inside a text prompt that a front end formatted with a chat template.

Text-completion front ends (SillyTavern's Text Completion modes, for one) send the whole chat as one prompt,
formatted with the model's instruct template and ending with an open assistant turn. For memory, that prompt is a
resent history like a chat front end's: `turns(prompt)` reads it back into (role, text) messages, so each is
appended once (aligned with the log's tail as chat histories are). Templates read: ChatML (`<|im_start|>role`),
Llama 3 (`<|start_header_id|>role<|end_header_id|>`) and Gemma (`<start_of_turn>user|model`). A prompt in no such
template (plain text) is None: the caller treats it as one new user turn. Pure: no I/O.
"""

from __future__ import annotations

from typing import Literal

import re

TurnRole = Literal["system", "user", "assistant"]
ROLES: dict[str, TurnRole] = {"system": "system", "user": "user", "assistant": "assistant", "model": "assistant"}

TEMPLATES = (
    re.compile(r"<\|im_start\|>(system|user|assistant)[ \t]*\n(.*?)<\|im_end\|>", re.S),
    re.compile(r"<\|start_header_id\|>(system|user|assistant)<\|end_header_id\|>\n*(.*?)<\|eot_id\|>", re.S),
    re.compile(r"<start_of_turn>(user|model)[ \t]*\n(.*?)<end_of_turn>", re.S),
)


def turns(prompt: str) -> list[tuple[TurnRole, str]] | None:
    """The closed turns of a templated transcript, oldest first (the open assistant turn the model is to complete
    is not one of them), or None when `prompt` is not written in a known template or holds no user turn."""
    for pattern in TEMPLATES:
        found = [(ROLES[m.group(1)], m.group(2).strip()) for m in pattern.finditer(prompt)]
        if found and any(role == "user" for role, _ in found):
            return [(role, text) for role, text in found if text]
    return None
