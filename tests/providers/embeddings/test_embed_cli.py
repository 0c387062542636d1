"""`engram embed "text"` shows the model, the dimension and the first values."""

from __future__ import annotations

import json

from engram.cli.main import main


def test_embed_prints_model_dimension_and_first_values(tmp_path, capsys):
    assert main(["--home", str(tmp_path), "embed", "the cat sat on the mat"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "model: all-MiniLM-L6-v2-onnx-int8"
    assert out[1] == "dim:   384"
    assert out[2].startswith("first 8 values: ") and len(out[2].split(": ")[1].split()) == 8


def test_embed_says_clearly_when_the_hashing_embedder_is_in_use(tmp_path, capsys):
    (tmp_path / "engram.json").write_text(json.dumps({"embedder": {"name": "hashing"}}))
    assert main(["--home", str(tmp_path), "embed", "-n", "3", "hello"]) == 0
    out = capsys.readouterr().out
    assert "model: hashing-v1-384" in out and "HASHING embedder, not a language model" in out
    assert "first 3 values: " in out
