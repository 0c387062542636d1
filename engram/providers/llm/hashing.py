"""Content hashes: prompt hashes for provenance and stable ids for notes."""

from __future__ import annotations

import hashlib

# Hex digits kept: 64 bits tell prompts and notes apart with room to spare, and keep events small.
HASH_HEX_CHARS = 16


def digest(*parts: str) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode())
        h.update(b"\x1f")  # unit separator: ("ab", "c") and ("a", "bc") hash differently
    return h.hexdigest()[:HASH_HEX_CHARS]


def note_id(source_seqs: tuple[int, ...], note_type: str, text: str) -> str:
    """The id of an observation note: the same note from the same messages always gets the same id."""
    return "obs-" + digest(",".join(map(str, source_seqs)), note_type, text)
