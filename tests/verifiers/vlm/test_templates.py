"""The question templates: verdict asked for last, options as published, answer keys, versioning."""

from __future__ import annotations

import hashlib
import json
import re
import string

import pytest

from mmverify.verifiers.vlm.templates import (
    COUNT_OPTIONS,
    QUADRANT_OPTIONS,
    TEMPLATE_VERSION,
    TEMPLATES,
    count_letter,
    quadrant_letter,
    question,
    relative_key,
)

# Pinned wording: any change to a template changes scores, so it must bump TEMPLATE_VERSION
# (part of every judged task's result key) and then update this digest.
TEMPLATES_DIGEST = {
    1: "1925ef53a5b80d9ab6021cdeefd898666d48d3e763b2796c5600e396ef0a807d",
    2: "9c83f40853bce5d3b2833931078d8853f72c3a8b72e28712962da1bf19f06011",
    3: "27e5853d0a8326cc3e1d527bf40725b01b26d568bae8251e08112d2928b2a274",  # + count_above_six (mmmg)
}


def test_template_wording_is_pinned_to_the_version():
    payload = {k: [t.kind, t.text, list(t.letters)] for k, t in sorted(TEMPLATES.items())}
    digest = hashlib.sha256(json.dumps(payload, ensure_ascii=False).encode()).hexdigest()
    assert TEMPLATES_DIGEST.get(TEMPLATE_VERSION) == digest, "template wording changed: bump TEMPLATE_VERSION"


def test_the_template_set():
    assert set(TEMPLATES) == {
        "existence", "absence", "scene", "exactly_one", "count", "count_more", "count_above_six", "relative_horizontal",
        "relative_vertical", "absolute", "ocr", "ocr_object", "ocr_chinese",
    }  # fmt: skip
    for template_id, template in TEMPLATES.items():
        assert template.id == template_id


@pytest.mark.parametrize("template_id", sorted(TEMPLATES))
def test_the_verdict_is_asked_for_last(template_id):
    template = TEMPLATES[template_id]
    last = template.text.split("\n\n")[-1]
    if template.kind == "yes_no":
        assert last.startswith("Think step by step") and last.endswith("`Answer: Yes` or `Answer: No`.")
    elif template.kind == "choice":
        assert last.startswith("Think step by step") and "`Answer: <letter>`" in last
    else:
        assert "JSON list" in last and last.startswith("End your reply")
    # nothing before the last paragraph asks for the answer format
    assert "Answer:" not in template.text[: -len(last)]


@pytest.mark.parametrize("template_id", sorted(t for t in TEMPLATES if TEMPLATES[t].kind == "choice"))
def test_choice_templates_list_exactly_their_letters(template_id):
    template = TEMPLATES[template_id]
    listed = re.findall(r"^([A-Z])\. ", template.text, flags=re.MULTILINE)
    assert tuple(listed) == template.letters


def test_published_option_sets():
    assert dict(COUNT_OPTIONS) == {"A": "fewer than 3, or none", "B": "3", "C": "4", "D": "5", "E": "6", "F": "more than 6"}
    assert [text.split(":")[0] for _, text in QUADRANT_OPTIONS] == [
        "the bottom-left quarter", "the bottom-right quarter", "the top-left quarter", "the top-right quarter", "the centre",
    ]  # fmt: skip
    assert "Neither" in TEMPLATES["relative_horizontal"].text and "Neither" in TEMPLATES["relative_vertical"].text


def test_negative_phrasing_and_conservative_chinese():
    assert "completely free of" in TEMPLATES["absence"].text
    assert "certainty" in TEMPLATES["ocr_chinese"].text and "never fill in" in TEMPLATES["ocr_chinese"].text


def test_fill_puts_every_value_in_and_refuses_missing_ones():
    q = question("relative_horizontal", first="surfboard", second="beach umbrella")
    assert q.template == "relative_horizontal" and q.template_ref == f"relative_horizontal@{TEMPLATES['relative_horizontal'].version}"
    assert "A. The surfboard is to the left of the beach umbrella." in q.prompt
    assert q.kind == "choice" and q.letters == ("A", "B", "C")
    assert "{" not in question("count", target="cats").prompt
    with pytest.raises(KeyError):
        question("relative_horizontal", first="cat")
    with pytest.raises(KeyError):
        question("no_such_template")
    # braces inside values are kept as text, not re-interpreted
    assert "{weird}" in question("existence", target="a sign saying {weird}").prompt


def test_templates_use_only_known_placeholders():
    for template in TEMPLATES.values():
        names = {name for _, name, _, _ in string.Formatter().parse(template.text) if name}
        assert names <= {"target", "first", "second"}


@pytest.mark.parametrize(("count", "letter"), [(0, "A"), (2, "A"), (3, "B"), (4, "C"), (5, "D"), (6, "E"), (7, "F"), (10, "F")])
def test_count_letter(count, letter):
    assert count_letter(count) == letter


@pytest.mark.parametrize(
    ("position", "letter"),
    [
        ("bottom left", "A"), ("bottom right", "B"), ("top left", "C"), ("top right", "D"),
        ("Bottom-Right corner", "B"), ("upper left", "C"), ("lower right", "B"), ("up-left", "C"),
        ("topright", "D"), ("bottom_left", "A"), ("centre", "E"), ("center", "E"), ("central", "E"),
        ("in the middle", "E"),
    ],
)  # fmt: skip
def test_quadrant_letter(position, letter):
    assert quadrant_letter(position) == letter


@pytest.mark.parametrize("position", ["", "left", "top", "top bottom left", "left right top", "somewhere", "top left center"])
def test_quadrant_letter_refuses_vague_positions(position):
    with pytest.raises(ValueError):
        quadrant_letter(position)


@pytest.mark.parametrize(
    ("relation", "key"),
    [
        ("to the left of", ("relative_horizontal", "A")),
        ("to the right of", ("relative_horizontal", "B")),
        ("above", ("relative_vertical", "A")),
        ("on top of", ("relative_vertical", "A")),
        ("below", ("relative_vertical", "B")),
        ("under", ("relative_vertical", "B")),
    ],
)
def test_relative_key(relation, key):
    assert relative_key(relation) == key


@pytest.mark.parametrize("relation", ["near", "", "left or right of", "above and to the left of"])
def test_relative_key_refuses_unclear_relations(relation):
    with pytest.raises(ValueError):
        relative_key(relation)
