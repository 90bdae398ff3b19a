"""Build-time validation of checker arguments, and the registry's ids and did-you-mean errors."""

from __future__ import annotations

import pytest

from mmverify.core.registry import UnknownIdError
from mmverify.verifiers.text import IFEVAL_IDS, MMMG_IDS, TEXT_CHECKERS, TextChecker, build_checker

VALID_KWARGS: dict[str, dict] = {
    "keywords:existence": {"keywords": ["a"]},
    "keywords:frequency": {"keyword": "a", "frequency": 1, "relation": "at least"},
    "keywords:forbidden_words": {"forbidden_words": ["a"]},
    "keywords:letter_frequency": {"letter": "a", "let_frequency": 1, "let_relation": "less than"},
    "language:response_language": {"language": "en"},
    "length_constraints:number_sentences": {"num_sentences": 2, "relation": "at least"},
    "length_constraints:number_paragraphs": {"num_paragraphs": 2},
    "length_constraints:number_words": {"num_words": 10, "relation": "less than"},
    "length_constraints:nth_paragraph_first_word": {"num_paragraphs": 2, "nth_paragraph": 1, "first_word": "a"},
    "detectable_content:number_placeholders": {"num_placeholders": 1},
    "detectable_content:postscript": {"postscript_marker": "P.S."},
    "detectable_format:number_bullet_lists": {"num_bullets": 2},
    "detectable_format:constrained_response": {},
    "detectable_format:number_highlighted_sections": {"num_highlights": 1},
    "detectable_format:multiple_sections": {"section_spliter": "Section", "num_sections": 2},
    "detectable_format:json_format": {},
    "detectable_format:title": {},
    "combination:two_responses": {},
    "combination:repeat_prompt": {"prompt_to_repeat": "Say hi."},
    "startend:end_checker": {"end_phrase": "Bye."},
    "startend:quotation": {},
    "change_case:capital_word_frequency": {"capital_frequency": 2, "capital_relation": "at least"},
    "change_case:english_capital": {},
    "change_case:english_lowercase": {},
    "punctuation:no_comma": {},
    "mmmg:exact_match": {"text": "hello there"},
    "mmmg:keyword_include": {"keywords": ["hello"]},
    "mmmg:keyword_exclude": {"keywords": ["hello"]},
    "mmmg:keyword_count": {"keyword": "hello", "relation": "== 2"},
    "mmmg:length_word": {"relation": "< 20"},
    "mmmg:start": {"phrase": "hello"},
    "mmmg:end": {"phrase": "bye"},
}


def test_registry_holds_every_id_exactly() -> None:
    assert sorted(TEXT_CHECKERS) == sorted(VALID_KWARGS)
    assert len(IFEVAL_IDS) == 25 and len(MMMG_IDS) == 7
    assert all(":" in ident for ident in TEXT_CHECKERS)


@pytest.mark.parametrize("ident", sorted(VALID_KWARGS))
def test_every_checker_builds_and_describes_itself(ident: str) -> None:
    checker = build_checker(ident, VALID_KWARGS[ident])
    assert isinstance(checker, TextChecker) and checker.id == ident
    assert isinstance(checker.check("some text, here."), bool)
    assert checker.describe() and type(checker).__name__ in repr(checker)


@pytest.mark.parametrize("ident", sorted(VALID_KWARGS))
def test_arguments_round_trip(ident: str) -> None:
    # IFEval instructions_test: test_get_instruction_args (rebuilding from the reported arguments
    # gives the same instruction)
    checker = build_checker(ident, VALID_KWARGS[ident])
    again = build_checker(ident, checker.kwargs)
    assert again.kwargs == checker.kwargs and again.describe() == checker.describe()


@pytest.mark.parametrize("ident", sorted(VALID_KWARGS))
def test_unknown_argument_is_rejected(ident: str) -> None:
    with pytest.raises(ValueError, match="unknown argument"):
        build_checker(ident, {**VALID_KWARGS[ident], "bogus": 1})


@pytest.mark.parametrize("ident", [i for i in sorted(VALID_KWARGS) if VALID_KWARGS[i]])
def test_missing_argument_is_rejected(ident: str) -> None:
    kwargs = dict(VALID_KWARGS[ident])
    kwargs.pop(next(iter(kwargs)))
    with pytest.raises(ValueError, match="missing required"):
        build_checker(ident, kwargs)


def test_null_arguments_are_ignored_like_unused_ones_in_ifeval_data() -> None:
    checker = build_checker("punctuation:no_comma", {"num_words": None, "relation": None})
    assert checker.check("no commas here")


@pytest.mark.parametrize(
    "ident, key",
    [
        ("keywords:frequency", "frequency"),
        ("keywords:letter_frequency", "let_frequency"),
        ("length_constraints:number_sentences", "num_sentences"),
        ("length_constraints:number_paragraphs", "num_paragraphs"),
        ("length_constraints:number_words", "num_words"),
        ("detectable_content:number_placeholders", "num_placeholders"),
        ("detectable_format:number_bullet_lists", "num_bullets"),
        ("detectable_format:number_highlighted_sections", "num_highlights"),
        ("detectable_format:multiple_sections", "num_sections"),
        ("change_case:capital_word_frequency", "capital_frequency"),
    ],
)
@pytest.mark.parametrize("bad", [-1, 2.5, "3", True, float("nan")])
def test_bad_counts_are_rejected(ident: str, key: str, bad: object) -> None:
    with pytest.raises(ValueError, match=key):
        build_checker(ident, {**VALID_KWARGS[ident], key: bad})


def test_integral_floats_from_json_are_accepted() -> None:
    assert build_checker("length_constraints:number_words", {"num_words": 3.0, "relation": "at least"}).threshold == 3


@pytest.mark.parametrize(
    "ident, key",
    [
        ("keywords:frequency", "relation"),
        ("keywords:letter_frequency", "let_relation"),
        ("length_constraints:number_sentences", "relation"),
        ("length_constraints:number_words", "relation"),
        ("change_case:capital_word_frequency", "capital_relation"),
    ],
)
@pytest.mark.parametrize("bad", ["more than", "at most", "Less Than", "<", 3])
def test_unknown_ifeval_relation_is_rejected(ident: str, key: str, bad: object) -> None:
    with pytest.raises(ValueError, match=key):
        build_checker(ident, {**VALID_KWARGS[ident], key: bad})


@pytest.mark.parametrize(
    "ident, kwargs, match",
    [
        ("keywords:existence", {"keywords": []}, "must not be empty"),
        ("keywords:existence", {"keywords": ["ok", "  "]}, "keywords\\[1\\]"),
        ("keywords:existence", {"keywords": {"a": 1}}, "list of strings"),
        ("keywords:forbidden_words", {"forbidden_words": [3]}, "must be a string"),
        ("keywords:letter_frequency", {"letter": "", "let_frequency": 1, "let_relation": "at least"}, "single"),
        ("keywords:letter_frequency", {"letter": " ", "let_frequency": 1, "let_relation": "at least"}, "single"),
        ("language:response_language", {"language": "xx"}, "not one the identifier"),
        ("language:response_language", {"language": ""}, "must not be empty"),
        ("length_constraints:nth_paragraph_first_word",
         {"num_paragraphs": 2, "nth_paragraph": 3, "first_word": "a"}, "exceeds"),
        ("length_constraints:nth_paragraph_first_word",
         {"num_paragraphs": 2, "nth_paragraph": 0, "first_word": "a"}, ">= 1"),
        ("detectable_content:postscript", {"postscript_marker": "  "}, "must not be empty"),
        ("startend:end_checker", {"end_phrase": 5}, "must be a string"),
        ("combination:repeat_prompt", {"prompt_to_repeat": ""}, "must not be empty"),
    ],
)
def test_invalid_values(ident: str, kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        build_checker(ident, kwargs)


def test_kwargs_must_be_a_mapping() -> None:
    with pytest.raises(ValueError, match="mapping"):
        build_checker("punctuation:no_comma", ["x"])  # type: ignore[arg-type]


def test_language_aliases_from_langdetect() -> None:
    assert build_checker("language:response_language", {"language": "zh-cn"}).kwargs == {"language": "zh"}
    assert build_checker("language:response_language", {"language": "zh-CN"}).check("我今天很高兴。")


@pytest.mark.parametrize(
    "typo, suggestion",
    [
        ("keywords:existance", "keywords:existence"),
        ("length_constraints:number_sentence", "length_constraints:number_sentences"),
        ("detectable_format:titel", "detectable_format:title"),
        ("mmmg:keyword_cont", "mmmg:keyword_count"),
        ("change_case:english_lower", "change_case:english_lowercase"),
    ],
)
def test_unknown_id_suggests_close_matches(typo: str, suggestion: str) -> None:
    with pytest.raises(UnknownIdError) as info:
        build_checker(typo)
    assert isinstance(info.value, KeyError)
    assert "Did you mean" in str(info.value) and suggestion in info.value.suggestions


def test_unknown_id_without_close_match_has_no_hint() -> None:
    with pytest.raises(UnknownIdError) as info:
        build_checker("nothing:like_this_at_all")
    assert "Did you mean" not in str(info.value)
