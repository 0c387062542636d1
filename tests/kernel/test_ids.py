"""Ids become file names: anything unsafe is refused with a clear message."""

import pytest

from engram.kernel.ids import InvalidIdError, find_discussion_id, strip_discussion_tags, validate_discussion


@pytest.mark.parametrize(
    "bad, reason",
    [
        ("../etc", "path separator"),
        ("a/b", "path separator"),
        ("a\\b", "path separator"),
        ("..", "'..'"),
        ("x..y", "'..'"),
        ("tab\there", "control character"),
        ("nul\x00", "control character"),
        ("x" * 129, "129 characters long; the limit is 128"),
        ("", "empty"),
        (".hidden", "starts with a dot"),
        ("semi;colon", "allowed are letters"),
    ],
)
def test_unsafe_ids_are_rejected_with_the_reason(bad, reason):
    with pytest.raises(InvalidIdError, match=reason.replace("(", r"\(")):
        validate_discussion(bad)


def test_safe_ids_pass_unchanged():
    for ok in ("conv-26", "acme_dashboard.v2", "A" * 128):
        assert validate_discussion(ok) == ok


def test_the_first_tag_in_any_message_wins_and_tags_are_stripped():
    texts = ["hello", "x [DiscussionId]trip-2024[/DiscussionId] y", "[DiscussionId]other[/DiscussionId]"]
    assert find_discussion_id(texts) == "trip-2024"
    assert strip_discussion_tags(texts[1]) == "x  y"
    assert find_discussion_id(["no tag here"]) is None


def test_a_tag_with_an_unsafe_id_is_an_error_not_a_path():
    with pytest.raises(InvalidIdError, match="path separator"):
        find_discussion_id(["[DiscussionId]../../etc/passwd[/DiscussionId]"])
