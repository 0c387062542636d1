"""`engram embed "text"`: the embedder in use, its dimension, and the first values of a vector."""

from __future__ import annotations

import argparse

# Values shown by default: enough to see that the vector is real, few enough to read.
SHOWN_VALUES = 8


def register(subparsers) -> None:
    p = subparsers.add_parser("embed", help="embed a text and show the model, dimension and first values")
    p.add_argument("text", nargs="+", help="text to embed (several arguments are joined with spaces)")
    p.add_argument("-n", "--values", type=int, default=SHOWN_VALUES, help=f"values to show (default {SHOWN_VALUES})")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from engram.config.service import load_service_config
    from engram.providers.embeddings import make_embedder
    from engram.providers.embeddings.factory import FALLBACK_WARNING

    config = load_service_config(args.home)
    embedder = make_embedder(config.embedder)
    vector = embedder.embed([" ".join(args.text)])[0]
    shown = " ".join(f"{x:+.4f}" for x in vector[: max(0, args.values)])
    print(f"model: {embedder.name}")
    if embedder.is_fallback:
        reason = "chosen in configuration" if config.embedder.name == "hashing" else FALLBACK_WARNING
        print(f"note:  this is the HASHING embedder, not a language model ({reason})")
    print(f"dim:   {embedder.dim}")
    print(f"first {min(args.values, embedder.dim)} values: {shown}")
    return 0
