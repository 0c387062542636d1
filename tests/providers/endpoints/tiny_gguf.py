"""Write a tiny llama-architecture GGUF with random weights: a real model file for a real llama.cpp server in tests.

    python tiny_gguf.py OUT.gguf [--seed 0] [--ctx 4096] [--plain]

Nothing is downloaded: the weights are seeded random numbers (numpy), the file is written with the `gguf`
package (PyPI). The same arguments always give the same bytes (the script prints the file's sha256).

The model: llama architecture, 64-d embeddings, one layer, 4 attention heads (2 KV heads: GQA), a 128-wide
SwiGLU FFN, all F32 (about 380 KB). Its vocabulary is SentencePiece-style with byte fallback, about 400 tokens:
the control tokens (<unk> <s> </s> <|im_start|> <|im_end|>), the 256 byte tokens <0x00>..<0xFF>, "▁" and every
printable ASCII character, "▁"+letter, and a few words with their prefix chains (so that the SPM merge reaches
them). Text therefore costs about one token per character, which makes context-window tests predictable
(a prompt of N characters is roughly N tokens). The metadata carries a ChatML chat template
(`tokenizer.chat_template`); <|im_end|> is the end-of-sequence token, so a chat answer stops there.

With random weights the text it writes is gibberish, but deterministic at temperature 0; grammar- or
schema-constrained sampling still yields valid JSON (bound strings with maxLength so it ends in few tokens).
One hidden dimension is held constant (it is set in every token embedding and no layer writes to it), and the
output rows of every non-text token (byte, control and unknown tokens, end-of-sequence included) weigh it
negatively: the model writes printable text only. Without that, byte tokens (256 of the ~420) put raw control
characters inside JSON strings, which llama-cpp-python's JSON grammar lets through (`[^"\\]`) and strict
`json.loads` rejects; and a free-form answer always runs to `max_tokens` (a grammar still ends with
end-of-sequence, the only token it allows at the end).
The constant dimension dominates pooled embeddings (every text's vector would be about 0.85 cosine from every other),
so a model for an embedding server is written `--plain`: no constant dimension, random rows throughout.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

import numpy as np
from gguf import GGUFWriter, LlamaFileType, PoolingType, TokenType

N_EMBD = 64
N_HEAD = 4
N_HEAD_KV = 2
N_FF = 128
N_LAYER = 1
BIAS_DIM = 0  # the constant dimension
BIAS_VALUE = 8.0  # its value in every token embedding
NON_TEXT_WEIGHT = -3.0  # output weight of non-text tokens on it: logits about -17 after RMSNorm
# ChatML, as most instruction-tuned GGUFs ship it (Qwen, Hermes...).
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
WORDS = ("the", "and", "you", "is", "to", "of", "my", "name", "user", "assistant", "memory", "hello", "summary")
SPACE = "\u2581"  # SentencePiece's visible space


def vocabulary() -> tuple[list[str], list[float], list[int]]:
    """(pieces, scores, token types). Higher score = merged first by the SPM tokenizer."""
    pieces: list[str] = []
    scores: list[float] = []
    types: list[int] = []

    def add(piece: str, score: float, kind: TokenType) -> None:
        if piece not in pieces:
            pieces.append(piece)
            scores.append(score)
            types.append(int(kind))

    add("<unk>", 0.0, TokenType.UNKNOWN)
    add("<s>", 0.0, TokenType.CONTROL)
    add("</s>", 0.0, TokenType.CONTROL)
    add("<|im_start|>", 0.0, TokenType.CONTROL)
    add("<|im_end|>", 0.0, TokenType.CONTROL)
    for b in range(256):
        add(f"<0x{b:02X}>", 0.0, TokenType.BYTE)
    add(SPACE, -1.0, TokenType.NORMAL)
    for c in range(0x21, 0x7F):
        add(chr(c), -1.0, TokenType.NORMAL)
    for c in "abcdefghijklmnopqrstuvwxyz":
        add(SPACE + c, -0.5, TokenType.NORMAL)
    for word in WORDS:  # every prefix too: SPM merges pairwise, so "▁th" must exist to reach "▁the"
        w = SPACE + word
        for end in range(2, len(w) + 1):
            add(w[:end], float(end), TokenType.NORMAL)
    return pieces, scores, types


def write(path: Path, seed: int = 0, ctx: int = 4096, plain: bool = False) -> str:
    rng = np.random.default_rng(seed)
    pieces, scores, types = vocabulary()
    n_vocab = len(pieces)
    head_dim = N_EMBD // N_HEAD

    w = GGUFWriter(str(path), "llama")
    w.add_name("engram-tiny-random")
    w.add_description("random weights, for wire-format tests only (engram)")
    w.add_context_length(ctx)
    w.add_embedding_length(N_EMBD)
    w.add_block_count(N_LAYER)
    w.add_feed_forward_length(N_FF)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_HEAD_KV)
    w.add_rope_dimension_count(head_dim)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(n_vocab)
    w.add_file_type(LlamaFileType.ALL_F32)
    # One vector per input when the server runs with embeddings on (otherwise a vector per token).
    w.add_pooling_type(PoolingType.MEAN)

    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list(pieces)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_unk_token_id(pieces.index("<unk>"))
    w.add_bos_token_id(pieces.index("<s>"))
    w.add_eos_token_id(pieces.index("<|im_end|>"))
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    w.add_chat_template(CHAT_TEMPLATE)

    def normal(*shape: int, std: float = 0.02) -> np.ndarray:
        return rng.normal(0.0, std, size=shape).astype(np.float32)

    # numpy shapes are ggml's ne reversed: (rows = outputs, cols = inputs).
    embd = normal(n_vocab, N_EMBD, std=1.0)
    if not plain:
        embd[:, BIAS_DIM] = BIAS_VALUE
    w.add_tensor("token_embd.weight", embd)
    for i in range(N_LAYER):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", np.ones(N_EMBD, dtype=np.float32))
        w.add_tensor(p + "attn_q.weight", normal(N_EMBD, N_EMBD))
        w.add_tensor(p + "attn_k.weight", normal(N_HEAD_KV * head_dim, N_EMBD))
        w.add_tensor(p + "attn_v.weight", normal(N_HEAD_KV * head_dim, N_EMBD))
        attn_out = normal(N_EMBD, N_EMBD)
        if not plain:
            attn_out[BIAS_DIM, :] = 0.0  # nothing writes the constant dimension
        w.add_tensor(p + "attn_output.weight", attn_out)
        w.add_tensor(p + "ffn_norm.weight", np.ones(N_EMBD, dtype=np.float32))
        w.add_tensor(p + "ffn_gate.weight", normal(N_FF, N_EMBD))
        w.add_tensor(p + "ffn_up.weight", normal(N_FF, N_EMBD))
        ffn_down = normal(N_EMBD, N_FF)
        if not plain:
            ffn_down[BIAS_DIM, :] = 0.0
        w.add_tensor(p + "ffn_down.weight", ffn_down)
    w.add_tensor("output_norm.weight", np.ones(N_EMBD, dtype=np.float32))
    out = normal(n_vocab, N_EMBD, std=0.5)
    if not plain:
        text = np.array([kind == int(TokenType.NORMAL) for kind in types])
        out[text, BIAS_DIM] = 0.0
        out[~text, BIAS_DIM] = NON_TEXT_WEIGHT
    w.add_tensor("output.weight", out)

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return hashlib.sha256(path.read_bytes()).hexdigest()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--ctx", type=int, default=4096, help="the model's training context (llama.context_length)")
    ap.add_argument("--plain", action="store_true", help="no constant dimension (for an embedding server)")
    args = ap.parse_args(argv)
    digest = write(args.out, seed=args.seed, ctx=args.ctx, plain=args.plain)
    print(f"{args.out}: {args.out.stat().st_size} bytes, {len(vocabulary()[0])} tokens, sha256 {digest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
