"""IFEval checks rewritten to run in linear time give what IFEval's own expressions give, on seeded
random texts made of the characters those expressions turn on."""

from __future__ import annotations

import random
import re

import pytest

from mmverify.verifiers.text import build_checker
from mmverify.verifiers.text.format import titles


def _text(rng: random.Random, alphabet: list[str], longest: int = 30) -> str:
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, longest)))


SEEDS = range(300)


@pytest.mark.parametrize("seed", SEEDS)
def test_placeholders_are_counted_as_ifeval_counts_them(seed):
    text = _text(random.Random(seed), ["[", "]", "a", "\n", " "])
    published = len(re.findall(r"\[.*?\]", text))
    for minimum in (1, 2, 3):
        assert build_checker("detectable_content:number_placeholders", {"num_placeholders": minimum}).check(text) == (published >= minimum), text


@pytest.mark.parametrize("seed", SEEDS)
def test_postscripts_are_found_as_ifeval_finds_them(seed):
    rng = random.Random(seed)
    text = _text(rng, ["p", "P", ".", "s", "S", " ", "\n", "\t", "x"])
    for marker, pattern in (("P.S.", r"\s*p\.\s?s\..*$"), ("P.P.S", r"\s*p\.\s?p\.\s?s.*$"), ("p.s", r"\s*" + re.escape("p.s") + r".*$")):
        published = bool(re.findall(pattern, text.lower(), flags=re.MULTILINE))
        assert build_checker("detectable_content:postscript", {"postscript_marker": marker}).check(text) == published, (marker, text)


@pytest.mark.parametrize("seed", SEEDS)
def test_bullets_are_counted_as_ifeval_counts_them(seed):
    text = _text(random.Random(seed), ["*", "-", " ", "\n", "\n", "\t", "a", "\r"])
    published = len(re.findall(r"^\s*\*[^\*].*$", text, flags=re.MULTILINE)) + len(re.findall(r"^\s*-.*$", text, flags=re.MULTILINE))
    for expected in range(4):
        assert build_checker("detectable_format:number_bullet_lists", {"num_bullets": expected}).check(text) == (published == expected), text


@pytest.mark.parametrize("seed", SEEDS)
def test_titles_are_what_ifeval_finds(seed):
    text = _text(random.Random(seed), ["<", "<", ">", ">", "a", " ", "\n"])
    assert titles(text) == re.findall(r"<<[^\n]+>>", text), text


def test_long_runs_are_read_once():
    assert not build_checker("detectable_content:number_placeholders", {"num_placeholders": 1}).check("[" * 200_000)
    assert not build_checker("detectable_content:postscript", {"postscript_marker": "P.S."}).check(" " * 200_000 + "x")
    assert build_checker("detectable_format:number_bullet_lists", {"num_bullets": 1}).check("\n" * 200_000 + "* one")
    assert titles("<" * 200_000) == [] and titles("<" * 10 + "a>>") == ["<" * 10 + "a>>"]
