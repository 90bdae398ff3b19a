"""Sentence splitting and word tokenisation without NLTK data (behaviour of punkt / word_tokenize)."""

from __future__ import annotations

import pytest

from mmverify.verifiers.text import count_sentences, count_words, split_sentences, word_tokenize


@pytest.mark.parametrize(
    "text, expected",
    [
        ("", []),
        ("   \n ", []),
        ("One sentence without an end", ["One sentence without an end"]),
        # abbreviations continue a sentence unless a common word follows
        ("Mr. Smith went to Washington. He arrived at 5 p.m. The end.",
         ["Mr. Smith went to Washington.", "He arrived at 5 p.m.", "The end."]),
        ("We met Dr. Jones and Prof. Lee, e.g. at lunch.", ["We met Dr. Jones and Prof. Lee, e.g. at lunch."]),
        # initials: a proper name keeps the sentence going
        ("A book by J. R. R. Tolkien is long. It is good.", ["A book by J. R. R. Tolkien is long.", "It is good."]),
        # numbers: a lower-case word after "3." continues, a capitalised one starts a sentence
        ("Section 3. below is wrong. See 3. It is fine.", ["Section 3. below is wrong.", "See 3.", "It is fine."]),
        # closing quotes and brackets stay with the sentence they close; ?/! always end one
        ('"Is it?" she asked. "Yes." He nodded.', ['"Is it?"', "she asked.", '"Yes."', "He nodded."]),
        ("He said (quietly.) Then left.", ["He said (quietly.)", "Then left."]),
        ("Wow!! Really?! Yes.", ["Wow!!", "Really?!", "Yes."]),
        # an ellipsis ends a sentence only before a clear sentence start
        ("Wait... what? Well... The end.", ["Wait... what?", "Well...", "The end."]),
        # no boundary without whitespace after the mark
        ("Visit example.com today.Thanks", ["Visit example.com today.Thanks"]),
    ],
)
def test_split_sentences(text: str, expected: list[str]) -> None:
    assert split_sentences(text) == expected
    assert count_sentences(text) == len(expected)


@pytest.mark.parametrize(
    "text, expected",
    [
        # the examples in NLTK's word_tokenize documentation
        ("Good muffins cost $3.88\nin New York.  Please buy me\ntwo of them.\nThanks.",
         ["Good", "muffins", "cost", "$", "3.88", "in", "New", "York", ".", "Please", "buy", "me", "two", "of",
          "them", ".", "Thanks", "."]),
        ("They'll save and invest more.", ["They", "'ll", "save", "and", "invest", "more", "."]),
        ("hi, my name can't hello,", ["hi", ",", "my", "name", "ca", "n't", "hello", ","]),
        # only the sentence-final period is split off; abbreviations keep theirs
        ("The U.S. economy grew 3% in 2023.", ["The", "U.S.", "economy", "grew", "3", "%", "in", "2023", "."]),
        ("I cannot go, I'm gonna stay.", ["I", "can", "not", "go", ",", "I", "'m", "gon", "na", "stay", "."]),
        ('She said "hi" (twice).', ["She", "said", "``", "hi", "''", "(", "twice", ")", "."]),
        ("A well-known fact--true!", ["A", "well-known", "fact", "--", "true", "!"]),
    ],
)
def test_word_tokenize(text: str, expected: list[str]) -> None:
    assert word_tokenize(text) == expected


def test_count_words_counts_word_character_runs() -> None:
    assert count_words("It's a well-known fact: 3.5 people.") == 9  # it s a well known fact 3 5 people
    assert count_words("") == 0
