"""Every row of the bad-input catalogue (docs/bad-input.md) is refused with its clear error, appending nothing."""

import re
from pathlib import Path

import pytest

from tests.reliability.bad_inputs import CASES, render


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_a_bad_input_is_refused_with_a_clear_error(case, tmp_path):
    message = case.run(tmp_path)
    assert re.search(case.expect, message), f"{case.given}: {message!r} does not match {case.expect!r}"
    assert "Traceback" not in message


def test_the_catalogue_has_at_least_sixty_rows_and_the_document_is_current():
    assert len(CASES) >= 60 and len({c.id for c in CASES}) == len(CASES)
    doc = Path(__file__).resolve().parents[2] / "docs" / "bad-input.md"
    assert doc.read_text() == render(), "docs/bad-input.md is stale: .venv/bin/python -m tests.reliability.bad_inputs > docs/bad-input.md"
