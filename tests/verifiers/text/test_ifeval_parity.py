"""IFEval parity: the published expectations of IFEval's own unit tests, re-run on our checkers.

Every case below comes from google-research/instruction_following_eval: ``instructions_test.py``
(class InstructionsTest) or ``instructions_util_test.py`` (class InstructionsUtilTest); the comment on
each group names the IFEval test it reproduces.  Inputs are IFEval's test strings; the expected
booleans/counts are IFEval's assertions.
"""

from __future__ import annotations

import pytest

from mmverify.verifiers.text import build_checker, count_sentences, count_words, split_sentences

LT, AL = "less than", "at least"


def case(test: str, ident: str, kwargs: dict | None, response: str, expected: bool):
    return pytest.param(ident, kwargs, response, expected, id=f"{test}:{ident}:{expected}")


# --- messages from IFEval's instructions_test.py (indentation preserved: it matters to some checks) --
BULLET_1 = """
  A Markdown bullet point is a way of formatting text to create a list. To
  create a bullet point, start each line with an asterisk (*). For example:
  * This is a bullet point.
  *(no space required)Another bullet point.
  * (no newline ending required)Another bullet point.
  markdown bullet points are often used to create to-do lists or to list items
  in a step-by-step guide."""
BULLET_2 = """
  Check that inline asterisk (*), *, will not be counted. Only * that starts a
  bullet list will be counted:
    * This is a bullet point.
    * Another bullet point.
    . dot is not counted"""
BULLET_3 = """
  Here are three bullets starting with asterisk:
  * I am a large language model, also known as a conversational AI.
  * I am trained on a massive amount of text data, and I am able to communicate.
  * I am still under development, but I am learning new things every day."""
BULLET_4 = """
  Here are three markdown bullets:
  - I am a large language model, also known as a conversational AI.
  - I am trained on a massive amount of text data, and I am able to communicate.
  -I am still under development, but I am learning new things every day."""
BULLET_5 = """
  Paragraph 1
  ***
  Paragraph 2
  ***
  Paragraph 3
  * only one bullet point
  """
CONSTRAINED_1 = """\n My answer is no.\n"""
CONSTRAINED_2 = """My answer is no.   """
CONSTRAINED_3 = """
  My answer is no. I am still under development and I am always learning and
  improving. I am not the best chatbot in the world, but I am striving to be
  the best that I can be."""
HIGHLIGHT_1 = """
  To highlight text with Markdown, you can use the * character before and after
  the text you want to highlight. For example, if you want to highlight the
  word `hello`, you would type:*hello*, You can also use the ** character to
  create bold text. For example, if you want to bold the word `hello`, you
  would type: **hello** """
HIGHLIGHT_2 = """
  Sure, here are the numerical methods for solving partial differential
  equations highlighted with Markdown:
  *Finite difference methods
  *Finite element methods*
  *Boundary element methods
  *Monte Carlo methods
  I hope this helps!"""
HIGHLIGHT_3 = """
  There is allowed to be *two different* highlighted *sections in the same*
  line. **This is also true** for **double markdown highlights.**
  """
SECTION_1 = """
  Your response must have multiple sections. Mark the beginning of each section
  with "Section X", such as:
  Section 1
  [content of section 1]
  Section 2
  [content of section 2]"""
SECTION_2 = """SECTION 1
  [content of section 1]
  SECTION 2
  [content of section 2]"""
PARAGRAPH_1 = """
  paragraph 1
  ***
  paragraph 2
  ***
  paragraph 3"""
PARAGRAPH_2 = """
          ***
  paragraph 1
          ***
      paragraph 2
          ***
      paragraph 3"""
PARAGRAPH_3 = """
  paragraph 1
          ***
      paragraph 2
          ***
      paragraph 3
          ***"""
PARAGRAPH_4 = """
  paragraph 1
          ***
      paragraph 2
          ***
          ***"""
POSTSCRIPT_1 = """
  I will do my best to follow your instructions and always start my responses
  with "My response is:". I will try to be as consistent as possible, but
  please be patient with me if I make a mistake. I am still under development,
  and I am always learning new things.

  P.S. I hope this is what you were looking for."""
POSTSCRIPT_2 = """
  Sure, here is my response with a postscript starting with P.P.S.:

  My response is: I hope this answers your question.

  P.P.S. I am always happy to answer any other questions you may have.

  Do you have any other questions for me?"""
POSTSCRIPT_3 = """
  The radius of a unit circle is 1. However, I can give you a funny and wrong
  answer: the radius of a unit circle is 0. This is because a unit circle is a
  circle with a radius of 1, and if the radius is 0, then the circle has no
  size and is just a point. (not starting a new line) P.S. I hope you enjoyed
  my joke!"""
POSTSCRIPT_4 = """
  If the length of a square is one, the area of the square will also be one.
  p.p.s what if the entire response was lower case letters?
  """
POSTSCRIPT_5 = """
  The mysteries of space and time are mysterious.
  P. S. Sometimes there are even spaces between P. and S..
  """
INCLUDE_1 = """
  Paris is a city of beauty and romance. The romantic river Seine winds its way
  through the city, past iconic landmarks like the Eiffel Tower and the Louvre
  Museum, where the Mona Lisa resides. Whether you're taking a boat cruise down
  the river or simply strolling along the banks, you're sure to be captivated
  by the city's charm."""
INCLUDE_2 = """
  Paris is a city of beauty, romance, and history. It is home to some of the
  most iconic landmarks in the world, including the Eiffel Tower, the Louvre
  Museum, and the Notre Dame Cathedral. The city is also known for its romantic
  river cruises, its delicious food, and its stylish people.
  """
FREQUENCY_1 = """
  keyword, Keyword, KEYWORD
  """
FREQUENCY_2 = """
    *keyword
    *Keyword
    *KEYWORD
  """
NUM_WORDS_1 = """
  d3sCRi7 lArge lAnguagE M0del w1tH 20 w0RdS."""
NUM_WORDS_2 = """
  L4RGE L4NGU4GE M0DEL: AI syst3m th4t und3rstands, g3n3r4tes, or tr4nsforms
  l4ngu4g3 b4s3d on pr3vious l3arning & d4t4."""
FIRST_WORD_1 = """
  paragraph 1

  I paragraph 2

  paragraph 3"""
FIRST_WORD_2 = """
  paragraph 1

  I paragraph 2"""
FIRST_WORD_3 = """
  paragraph 1

  fail paragraph 2

  paragraph 3"""
FIRST_WORD_4 = """
  Wow this is a very long response.

  I can't believe there is more than three paragraphs.

  Really more than three? No way!

  I can't believe it but I guess I am living proof.

  Haha, you go that right."""
FIRST_WORD_5 = """
  Wow this is a very long response.

  I can't believe there is more than three paragraphs.

  "Really?! more than three? No way!"

  I can't believe it but I guess I am living proof.

  Haha, you go that right."""
FIRST_WORD_6 = """
  Wow this is a very long response.

  I can't believe there is more than three paragraphs.

  Rea!lly more than three? No way!

  I can't believe it but I guess I am living proof.

  Haha, you go that right."""
FORBIDDEN_1 = """
  The Nazis came to power in 1933 through a combination of legal and illegal
  means. Hitler was appointed chancellor by President Paul von Hindenburg, and
  the Nazis quickly consolidated their power by passing a series of laws that
  restricted the rights of opposition parties and individuals. By 1934, Hitler
  had become dictator of Germany.
  """
FORBIDDEN_2 = """
  Dinosaurs were a diverse group of reptiles that dominated the Earth for over
  160 million years. They came in all shapes and sizes, from the tiny
  Compsognathus to the massive Argentinosaurus. Dinosaurs were the most
  successful land animals on Earth until they went extinct about 66 million
  years ago. The exact cause of their extinction is still unknown, but it
  is thought to have been a combination of factors, including an asteroid
  impact and climate change.
  """
FORBIDDEN_3 = """
  GPT, or Generative Pre-trained Transformer, is a family of neural network
  models that uses the transformer architecture. GPT models are trained on a
  massive dataset of text and code, and can be used for a variety of tasks,
  including text generation, translation, and question answering. GPT models
  have been shown to be very effective at these tasks, and are being used by
  a variety of companies and organizations like Google.
  """
TWO_1 = """
  This is response 1.
  ******
  This is response 2.
  """
TWO_2 = """
  This is response 1.
  ******
  This is response 1.
  """
TWO_3 = """
  This is response 1.
  ******
  This is response 2.
  ******
  This is response 3.
  """
TWO_4 = """
  ******
  Response 1.
  ******
  ******
  Response 2.
  ******
  """
TWO_5 = """
  ******
  Response 1
  ******
  Response 2
  ******
  """
REPEAT_ANSWER_1 = """Write a CL description. Hi, Le and TJ, please
  check this out. Thanks.
  """
REPEAT_ANSWER_2 = """Hi, Le and TJ. Write a CL description. Thanks.
  """
END_1 = """
  The answer is 7. Any more questions?
  """
END_2 = """
  At the end of this prompt I am required to say that this is the end.
  """
END_3 = """
  This will fail. Paris is cool.
  """
TITLE_1 = """
  <<Song of Joy>>
  La la la. Happy song.
  """
TITLE_2 = """
  Is it fine for title to be at the end?
  <<This is the title>>
  """
TITLE_3 = """
  << >>
  There is no title.
  """
TITLE_4 = """
  <<This is not a title.
  This is a paragraph.>>
  """
LETTER_1 = """
  There is the T. Four T's.
  """
LETTER_2 = """
  asdfghjkl!!aA
  """
CAPITAL_1 = """
  THIS IS AN ENGLISH SENTENCE. EVERY LETTER IS CAPITALIZED!!! AMAZING.
  """
CAPITAL_2 = """
  Every Word Is Capitalized.
  """
LOWER_1 = """
  every letter is lowercase.
  """
LOWER_2 = """
  Almost every letter is lowercase.
  """
COMMA_1 = """
  Every sentence is short. There is no need for a comma.
  """
COMMA_2 = """
  Since the start of time, people have always found a way to punctuate.
  """
CAPWORDS_1 = """
  HERE there are THREE FUlly CAPITAL words.
  """
CAPWORDS_2 = """
  THERE are Four FULLY CAPITAL WORDS. Many Others Are Only Partially So.
  """
QUOTE_1 = """
  "This entire message is wrapped in double quotation marks."
  """
QUOTE_2 = """
  "This message is wrapped in double quotation marks." But not everything.
  """

PLACEHOLDER_1 = (
    "Sure, here is a short template with 5 placeholders:\n"
    "[Name]\n[Email]\n[Phone]\n[Address]\n[Website]\n"
    "This template can be used for a variety of purposes, such ascreating a contact list, "
    "sending out surveys, or creating a sign-up form."
)
PLACEHOLDER_2 = "My [adjective] [noun] is [adjective] [noun]. I [verb] and [verb]."

CASES = [
    # IFEval instructions_test: test_response_language
    case("test_response_language", "language:response_language", {"language": "en"}, "The response is English", True),
    # IFEval instructions_test: test_response_multilanguage
    case("test_response_multilanguage", "language:response_language", {"language": "es"},
         "Desayunamos en McDonald's hoy", True),
    case("test_response_multilanguage", "language:response_language", {"language": "en"},
         "Today we visit the Louvre", True),
    # IFEval instructions_test: test_number_sentences
    case("test_number_sentences", "length_constraints:number_sentences", {"relation": LT, "num_sentences": 4},
         "xx,x. xx,x! xx/x. x{x}x?", False),
    case("test_number_sentences", "length_constraints:number_sentences", {"relation": LT, "num_sentences": 5},
         "xxxx. xx,x! xxxx. x(x)x?", True),
    case("test_number_sentences", "length_constraints:number_sentences", {"relation": AL, "num_sentences": 4},
         "xxxx. xx,x! xx|x. x&x x?", True),
    case("test_number_sentences", "length_constraints:number_sentences", {"relation": AL, "num_sentences": 5},
         "xx-x. xx,x! xx}x. x,xx?", False),
    # IFEval instructions_test: test_number_placeholders
    case("test_number_placeholders", "detectable_content:number_placeholders", {"num_placeholders": 5},
         PLACEHOLDER_1, True),
    case("test_number_placeholders", "detectable_content:number_placeholders", {"num_placeholders": 7},
         PLACEHOLDER_2, False),
    # IFEval instructions_test: test_number_bullet_lists
    case("test_number_bullet_lists", "detectable_format:number_bullet_lists", {"num_bullets": 3}, BULLET_1, True),
    case("test_number_bullet_lists", "detectable_format:number_bullet_lists", {"num_bullets": 2}, BULLET_2, True),
    case("test_number_bullet_lists", "detectable_format:number_bullet_lists", {"num_bullets": 3}, BULLET_3, True),
    case("test_number_bullet_lists", "detectable_format:number_bullet_lists", {"num_bullets": 3}, BULLET_4, True),
    case("test_number_bullet_lists", "detectable_format:number_bullet_lists", {"num_bullets": 1}, BULLET_5, True),
    # IFEval instructions_test: test_constrained_response
    case("test_constrained_response", "detectable_format:constrained_response", None, CONSTRAINED_1, True),
    case("test_constrained_response", "detectable_format:constrained_response", None, CONSTRAINED_2, True),
    case("test_constrained_response", "detectable_format:constrained_response", None, CONSTRAINED_3, True),
    # IFEval instructions_test: test_number_highlights
    case("test_number_highlights", "detectable_format:number_highlighted_sections", {"num_highlights": 2},
         HIGHLIGHT_1, True),
    case("test_number_highlights", "detectable_format:number_highlighted_sections", {"num_highlights": 2},
         HIGHLIGHT_2, False),
    case("test_number_highlights", "detectable_format:number_highlighted_sections", {"num_highlights": 4},
         HIGHLIGHT_3, True),
    # IFEval instructions_test: test_section_checker
    case("test_section_checker", "detectable_format:multiple_sections",
         {"section_spliter": "Section", "num_sections": 3}, SECTION_1, False),
    case("test_section_checker", "detectable_format:multiple_sections",
         {"section_spliter": "SECTION", "num_sections": 2}, SECTION_2, True),
    # IFEval instructions_test: test_paragraph_checker
    case("test_paragraph_checker", "length_constraints:number_paragraphs", {"num_paragraphs": 3}, PARAGRAPH_1, True),
    case("test_paragraph_checker", "length_constraints:number_paragraphs", {"num_paragraphs": 3}, PARAGRAPH_2, True),
    case("test_paragraph_checker", "length_constraints:number_paragraphs", {"num_paragraphs": 3}, PARAGRAPH_3, True),
    case("test_paragraph_checker", "length_constraints:number_paragraphs", {"num_paragraphs": 2}, PARAGRAPH_4, False),
    # IFEval instructions_test: test_postscript_checker
    case("test_postscript_checker", "detectable_content:postscript", {"postscript_marker": "P.S."}, POSTSCRIPT_1, True),
    case("test_postscript_checker", "detectable_content:postscript", {"postscript_marker": "PS:"}, POSTSCRIPT_1, False),
    case("test_postscript_checker", "detectable_content:postscript", {"postscript_marker": "P.P.S"}, POSTSCRIPT_2, True),
    case("test_postscript_checker", "detectable_content:postscript", {"postscript_marker": "P.S."}, POSTSCRIPT_3, True),
    case("test_postscript_checker", "detectable_content:postscript", {"postscript_marker": "P.P.S"}, POSTSCRIPT_4, True),
    case("test_postscript_checker", "detectable_content:postscript", {"postscript_marker": "P.S."}, POSTSCRIPT_5, True),
    # IFEval instructions_test: test_keyword_checker
    case("test_keyword_checker", "keywords:existence", {"keywords": ["romantic", "river", "Mona Lisa"]},
         INCLUDE_1, True),
    case("test_keyword_checker", "keywords:existence", {"keywords": ["romantic", "river", "Mona Lisa"]},
         INCLUDE_2, False),
    # IFEval instructions_test: test_keyword_frequency_checker
    case("test_keyword_frequency_checker", "keywords:frequency",
         {"keyword": "  keyword ", "frequency": 4, "relation": LT}, FREQUENCY_1, True),
    case("test_keyword_frequency_checker", "keywords:frequency",
         {"keyword": "  keyword ", "frequency": 3, "relation": AL}, FREQUENCY_1, True),
    case("test_keyword_frequency_checker", "keywords:frequency",
         {"keyword": "KEYWORD", "frequency": 4, "relation": AL}, FREQUENCY_2, False),
    # IFEval instructions_test: test_num_words_checker
    case("test_num_words_checker", "length_constraints:number_words", {"num_words": 8, "relation": LT},
         NUM_WORDS_1, True),
    case("test_num_words_checker", "length_constraints:number_words", {"num_words": 16, "relation": LT},
         NUM_WORDS_2, False),
    case("test_num_words_checker", "length_constraints:number_words", {"num_words": 16, "relation": AL},
         NUM_WORDS_2, True),
    # IFEval instructions_test: test_paragraph_first_word
    *[
        case("test_paragraph_first_word", "length_constraints:nth_paragraph_first_word",
             {"num_paragraphs": n, "nth_paragraph": nth, "first_word": word}, text, expected)
        for text, n, nth, word, expected in [
            (FIRST_WORD_1, 3, 2, "I", True),
            (FIRST_WORD_2, 3, 2, "I", False),
            (FIRST_WORD_3, 3, 2, "I", False),
            (FIRST_WORD_4, 5, 5, "haha", True),
            (FIRST_WORD_5, 5, 3, "Really", True),
            (FIRST_WORD_6, 5, 3, "Really", False),
        ]
    ],
    # IFEval instructions_test: test_forbidden_words
    case("test_forbidden_words", "keywords:forbidden_words", {"forbidden_words": ["HOUSE", "POWER", "BECOME"]},
         FORBIDDEN_1, False),
    case("test_forbidden_words", "keywords:forbidden_words", {"forbidden_words": ["HOUSE", "POWER", "BECOME"]},
         FORBIDDEN_2, True),
    case("test_forbidden_words", "keywords:forbidden_words", {"forbidden_words": ["HOUSE", "POWER", "BECOME"]},
         FORBIDDEN_3, True),
    case("test_forbidden_words", "keywords:forbidden_words", {"forbidden_words": ["GOOGLE", "TEXT"]},
         FORBIDDEN_1, True),
    case("test_forbidden_words", "keywords:forbidden_words", {"forbidden_words": ["GOOGLE", "TEXT"]},
         FORBIDDEN_2, True),
    case("test_forbidden_words", "keywords:forbidden_words", {"forbidden_words": ["GOOGLE", "TEXT"]},
         FORBIDDEN_3, False),
    case("test_forbidden_words", "keywords:forbidden_words", {"forbidden_words": ["GENE", "TRANSFORM"]},
         FORBIDDEN_3, True),
    # IFEval instructions_test: test_two_responses
    case("test_two_responses", "combination:two_responses", None, TWO_1, True),
    case("test_two_responses", "combination:two_responses", None, TWO_2, False),
    case("test_two_responses", "combination:two_responses", None, TWO_3, False),
    case("test_two_responses", "combination:two_responses", None, TWO_4, False),
    case("test_two_responses", "combination:two_responses", None, TWO_5, True),
    # IFEval instructions_test: test_prompt_repeat_answer
    case("test_prompt_repeat_answer", "combination:repeat_prompt", {"prompt_to_repeat": "Write a CL description."},
         REPEAT_ANSWER_1, True),
    case("test_prompt_repeat_answer", "combination:repeat_prompt", {"prompt_to_repeat": "Write a CL description."},
         REPEAT_ANSWER_2, False),
    # IFEval instructions_test: test_end_checker
    case("test_end_checker", "startend:end_checker", {"end_phrase": "\n  Any more questions?\n  "}, END_1, True),
    case("test_end_checker", "startend:end_checker", {"end_phrase": "\n  This is the end.\n  "}, END_2, True),
    case("test_end_checker", "startend:end_checker", {"end_phrase": "\n  This will fail.\n  "}, END_3, False),
    # IFEval instructions_test: test_title_checker
    case("test_title_checker", "detectable_format:title", None, TITLE_1, True),
    case("test_title_checker", "detectable_format:title", None, TITLE_2, True),
    case("test_title_checker", "detectable_format:title", None, TITLE_3, False),
    case("test_title_checker", "detectable_format:title", None, TITLE_4, False),
    # IFEval instructions_test: test_letter_frequency_checker
    case("test_letter_frequency_checker", "keywords:letter_frequency",
         {"letter": "T", "let_frequency": 4, "let_relation": AL}, LETTER_1, True),
    case("test_letter_frequency_checker", "keywords:letter_frequency",
         {"letter": "a", "let_frequency": 4, "let_relation": LT}, LETTER_2, True),
    case("test_letter_frequency_checker", "keywords:letter_frequency",
         {"letter": "p", "let_frequency": 4, "let_relation": AL}, LETTER_2, False),
    # IFEval instructions_test: test_letter_frequency_checker_accepts_punctuation
    case("test_letter_frequency_checker_accepts_punctuation", "keywords:letter_frequency",
         {"letter": "#", "let_frequency": 4, "let_relation": AL}, "#one #two #three #four", True),
    case("test_letter_frequency_checker_accepts_punctuation", "keywords:letter_frequency",
         {"letter": "#", "let_frequency": 4, "let_relation": AL}, "#one #two #three", False),
    # IFEval instructions_test: test_english_capital_checker
    case("test_english_capital_checker", "change_case:english_capital", None, CAPITAL_1, True),
    case("test_english_capital_checker", "change_case:english_capital", None, CAPITAL_2, False),
    # IFEval instructions_test: test_english_lowercase_checker
    case("test_english_lowercase_checker", "change_case:english_lowercase", None, LOWER_1, True),
    case("test_english_lowercase_checker", "change_case:english_lowercase", None, LOWER_2, False),
    # IFEval instructions_test: test_comma
    case("test_comma", "punctuation:no_comma", None, COMMA_1, True),
    case("test_comma", "punctuation:no_comma", None, COMMA_2, False),
    # IFEval instructions_test: test_capital_word_frequency
    case("test_capital_word_frequency", "change_case:capital_word_frequency",
         {"capital_frequency": 3, "capital_relation": AL}, CAPWORDS_1, True),
    case("test_capital_word_frequency", "change_case:capital_word_frequency",
         {"capital_frequency": 5, "capital_relation": LT}, CAPWORDS_2, True),
    case("test_capital_word_frequency", "change_case:capital_word_frequency",
         {"capital_frequency": 4, "capital_relation": LT}, CAPWORDS_2, False),
    # IFEval instructions_test: test_quotation
    case("test_quotation", "startend:quotation", None, QUOTE_1, True),
    case("test_quotation", "startend:quotation", None, QUOTE_2, False),
]


@pytest.mark.parametrize("ident, kwargs, response, expected", CASES)
def test_ifeval_instruction_expectations(ident: str, kwargs: dict | None, response: str, expected: bool) -> None:
    assert build_checker(ident, kwargs).check(response) is expected


def test_every_shared_instruction_has_an_ifeval_case() -> None:
    # The 25 IFEval ids we implement; json_format is the only one IFEval's test file exercises only
    # through its args round trip (test_get_instruction_args), so it has its own cases below.
    covered = {p.values[0] for p in CASES} | {"detectable_format:json_format"}
    from mmverify.verifiers.text import IFEVAL_IDS

    assert set(IFEVAL_IDS) <= covered
    assert len(IFEVAL_IDS) == 25


@pytest.mark.parametrize(
    "response, expected",
    [
        ('{"a": 1}', True),
        ('```json\n{"a": [1, 2]}\n```', True),
        ("```JSON\n[1, 2]\n```", True),
        ("```\n\"text\"\n```", True),
        ("Here is the JSON: {\"a\": 1}", False),
        ("{'a': 1}", False),
    ],
)
def test_json_format_semantics(response: str, expected: bool) -> None:
    # IFEval instructions.py JsonFormat: strip, drop ```json/```Json/```JSON/``` prefixes and a ```
    # suffix, then json.loads
    assert build_checker("detectable_format:json_format").check(response) is expected


# IFEval instructions_util_test: test_word_count
@pytest.mark.parametrize(
    "text, expected",
    [
        ("word1, word2, word3, word4.", 4),
        (
            """
      Bard can you tell me which is the best optimization method for the
      transition from an hydro-thermal system to an hydro-renewables system""",
            24,
        ),
        ("""
      Hyphenated-word has two word counts.
      """, 6),
    ],
)
def test_util_word_count(text: str, expected: int) -> None:
    assert count_words(text) == expected


# IFEval instructions_util_test: test_count_sentences (punkt)
@pytest.mark.parametrize(
    "text, expected",
    [
        ("xx,x. xx,x! xx/x. x{x}x? x.", 5),
        ("xx,x! xxxx. x(x)x?", 3),
        ("xxxx. xx,x! xx|x. x&x x?", 4),
        ("xx-x]xx,x! x{x}xx,x.", 2),
    ],
)
def test_util_count_sentences(text: str, expected: int) -> None:
    assert count_sentences(text) == expected


def test_util_sentence_splitter_examples() -> None:
    # IFEval instructions_util_test: test_sentence_splitter.  IFEval checks these splits with its own
    # regex splitter (used by the unregistered key-sentences instruction); our punkt-like splitter
    # gives the same sentences (modulo the newlines inside them, which IFEval turns into spaces).
    text_1 = """
  Google is a technology company. It was founded in 1998 by Larry Page
and Sergey Brin. Google's mission is to organize the world's information
and make it universally accessible and useful.
  """
    text_2 = """
  The U.S.A has many Ph.D. students. They will often haven a .com website
sharing the research that they have done.
  """
    assert [s.replace("\n", " ") for s in split_sentences(text_1)] == [
        "Google is a technology company.",
        "It was founded in 1998 by Larry Page and Sergey Brin.",
        "Google's mission is to organize the world's information and make it universally accessible and useful.",
    ]
    assert [s.replace("\n", " ") for s in split_sentences(text_2)] == [
        "The U.S.A has many Ph.D. students.",
        "They will often haven a .com website sharing the research that they have done.",
    ]


def test_letter_frequency_rejects_invalid_explicit_args() -> None:
    # IFEval instructions_test: test_letter_frequency_checker_rejects_invalid_explicit_args
    with pytest.raises(ValueError, match="single non-whitespace character"):
        build_checker("keywords:letter_frequency", {"letter": "ab", "let_frequency": 1, "let_relation": AL})
    with pytest.raises(ValueError, match="let_frequency must be >= 0"):
        build_checker("keywords:letter_frequency", {"letter": "a", "let_frequency": -1, "let_relation": AL})


def test_constrained_start_behaviour_is_not_registered() -> None:
    # IFEval's registry comments out multi-turn:constrained_start, keywords:key_sentences,
    # detectable_format:rephrase and detectable_content:rephrase_paragraph; so do we.
    from mmverify.verifiers.text import TEXT_CHECKERS

    for ident in ("multi-turn:constrained_start", "keywords:key_sentences", "detectable_format:rephrase",
                  "detectable_content:rephrase_paragraph"):
        assert ident not in TEXT_CHECKERS
