"""Sentence splitting and word tokenisation without NLTK data.

IFEval counts sentences with NLTK's pretrained English punkt model and splits words for
``change_case:capital_word_frequency`` with ``nltk.word_tokenize``; MMMG counts words of a transcript
with ``word_tokenize`` too.  Loading those needs NLTK data files, which may not exist offline, so this
module re-implements the *decision rules* deterministically:

* Sentences (punkt-like): a candidate boundary is a ``.``, ``?`` or ``!`` that ends a
  whitespace-separated chunk (or is followed inside the chunk by punctuation such as ``)`` or ``"``).
  ``?`` and ``!`` always end a sentence.  A ``.`` ends one unless the word before it is a known
  abbreviation, an initial, a number or an ellipsis, in which case the next word decides (punkt's
  "orthographic heuristic").  Punkt learns which words are usually lower-case from its training
  corpus; here that knowledge is a bundled list of common English words, and a short abbreviation
  list replaces the learned one.  Rare-word cases (an abbreviation followed by an unusual capitalised
  word) can therefore differ from punkt.
* Words (Treebank-like): NLTK's rules for splitting punctuation, quotes, brackets and contractions
  (``don't`` -> ``do`` ``n't``, ``cannot`` -> ``can`` ``not``) applied to each sentence.
"""

from __future__ import annotations

import re

from .langdata import STOPWORDS

# Words before a period that do not end a sentence by themselves (lower-case, final period removed).
ABBREVIATIONS: frozenset[str] = frozenset(
    """
    mr mrs ms mssrs messrs dr prof rev hon st sr jr mt ft gen gov sen rep sgt capt cpt col lt maj cmdr adm
    co corp inc ltd llc bros dept univ assn est approx vs etc al cf viz
    e.g i.e a.m p.m u.s u.k u.n u.s.a n.y l.a d.c ph.d m.d b.a m.a b.sc m.sc
    jan feb mar apr jun jul aug sep sept oct nov dec mon tue tues wed thu thur thurs fri sat sun
    no nos vol vols fig figs ch chap sec pp ed eds ave blvd rd hwy
    """.split()
)

# Words punkt would have seen written in lower case: a capitalised one after a period starts a sentence.
_COMMON_LOWER: frozenset[str] = STOPWORDS["en"] - {"i"}

_SENT_END = ".?!"
# Characters that may directly follow a sentence end inside the same chunk (punkt's "non-word" set).
_AFTER_END = frozenset(')";}]*:@\'({[!?')
_CLOSERS = frozenset("\"')]}")
_NUMBER = re.compile(r"^-?[.,]?\d[\d,.-]*\.?$")
_INITIAL = re.compile(r"^[^\W\d]\.$")
_CHUNK = re.compile(r"\S+")


def _starts_sentence(token: str) -> bool | None:
    """Does ``token`` look like the first word of a sentence?  True, False, or None (unknown)."""
    if not token or token in ";:,.!?":
        return False
    if token[0].islower():
        return False
    if token[0].isupper():
        word = token.rstrip(".,;:!?\"')]}").lower()
        return True if word in _COMMON_LOWER else None
    return None


def _period_ends_sentence(word: str, next_token: str) -> bool:
    """Decide a ``.`` boundary from the word that carries the period and the token that follows."""
    if word == ".":
        return True
    starts = _starts_sentence(next_token)
    if word.endswith(".."):  # an ellipsis ends a sentence only before a clear sentence start
        return starts is True
    core = word[:-1].lower()
    if _INITIAL.match(word):
        # "J. Smith" or "x. y": an initial continues unless the next word clearly starts a sentence
        if starts is False:
            return False
        return not (starts is None and next_token[:1].isupper())
    if core in ABBREVIATIONS or core.split("-")[-1] in ABBREVIATIONS:
        return starts is True
    if _NUMBER.match(word):  # "in 1998. It" ends; "section 3. below" does not
        return starts is not False
    return True


def _word_before(text: str) -> str:
    """The token that carries the final period: the tail after the last punctuation that splits words."""
    i = len(text) - 1
    while i > 0 and text[i - 1] not in _AFTER_END:
        i -= 1
    return text[i:]


def _first_token(chunk: str) -> str:
    """The first punkt-style token of a chunk: one leading punctuation mark, or the word."""
    if chunk[:1] in _AFTER_END or chunk[:1] in "`":
        return chunk[:1]
    return chunk


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) offsets of the sentences of ``text``, whitespace trimmed."""
    chunks = [(m.start(), m.end()) for m in _CHUNK.finditer(text)]
    breaks: list[int] = []
    for index, (start, end) in enumerate(chunks):
        chunk = text[start:end]
        has_next = index + 1 < len(chunks)
        pos = None
        for p in range(len(chunk) - 1, -1, -1):  # the last qualifying end mark of the chunk
            if chunk[p] in _SENT_END and (
                (p + 1 < len(chunk) and chunk[p + 1] in _AFTER_END) or (p + 1 == len(chunk) and has_next)
            ):
                pos = p
                break
        if pos is None:
            continue
        rest = chunk[pos + 1 :]
        if chunk[pos] == ".":
            following = _first_token(rest) if rest else _first_token(text[chunks[index + 1][0] : chunks[index + 1][1]])
            if not _period_ends_sentence(_word_before(chunk[: pos + 1]), following):
                continue
        # closing quotes/brackets right after the end mark stay with the sentence they close
        cut = end if rest and all(c in _CLOSERS for c in rest) else start + pos + 1
        if cut < end and not has_next:  # "end!!" closing the text: no new sentence can start inside it
            continue
        breaks.append(cut)
    spans: list[tuple[int, int]] = []
    begin = 0
    for cut in breaks + [len(text)]:
        piece = text[begin:cut]
        if piece.strip():
            lead = len(piece) - len(piece.lstrip())
            spans.append((begin + lead, begin + len(piece.rstrip())))
        begin = cut
    return spans


def split_sentences(text: str) -> list[str]:
    """The sentences of ``text`` (see the module docstring for the rules)."""
    return [text[a:b] for a, b in sentence_spans(text)]


def count_sentences(text: str) -> int:
    return len(sentence_spans(text))


def count_words(text: str) -> int:
    """IFEval's word count: runs of word characters, so ``hydro-thermal`` counts as two."""
    return len(re.findall(r"\w+", text))


# --- Treebank-style word tokenisation (the rules of NLTK's default word tokenizer) -------------------

_STARTING = [
    (re.compile(r"([«“‘„]|[`]+)"), r" \1 "),
    (re.compile(r'^"'), "``"),
    (re.compile(r"(``)"), r" \1 "),
    (re.compile(r'([ (\[{<])("|\'{2})'), r"\1 `` "),
    (re.compile(r"(?i)(')(?!re|ve|ll|m|t|s|d|n)(\w)\b"), r"\1 \2"),
]
_PUNCTUATION = [
    (re.compile(r'([^.])(\.)([\])}>"\']*)\s*$'), r"\1 \2 \3 "),  # only the sentence-final period
    (re.compile(r"([:,])([^\d])"), r" \1 \2"),
    (re.compile(r"([:,])$"), r" \1 "),
    (re.compile(r"\.{2,}"), r" \g<0> "),
    (re.compile(r"[;@#$%&]"), r" \g<0> "),
    (re.compile(r"[?!]"), r" \g<0> "),
    (re.compile(r"([^'])' "), r"\1 ' "),
    (re.compile(r"[*]"), r" \g<0> "),
]
_BRACKETS = (re.compile(r"[\]\[(){}<>]"), r" \g<0> ")
_DASHES = (re.compile(r"--"), r" -- ")
_ENDING = [
    (re.compile(r"([»”’])"), r" \1 "),
    (re.compile(r"''"), " '' "),
    (re.compile(r'"'), " '' "),
    (re.compile(r"([^' ])('[sS]|'[mM]|'[dD]|') "), r"\1 \2 "),
    (re.compile(r"([^' ])('ll|'LL|'re|'RE|'ve|'VE|n't|N'T) "), r"\1 \2 "),
]
_SPLIT_WORDS = [
    re.compile(p, re.IGNORECASE)
    for p in (
        r"\b(can)(not)\b", r"\b(d)('ye)\b", r"\b(gim)(me)\b", r"\b(gon)(na)\b",
        r"\b(got)(ta)\b", r"\b(lem)(me)\b", r"\b(more)('n)\b", r"\b(wan)(na)(?=\s)",
        r" ('t)(is)\b", r" ('t)(was)\b",
    )
]


def _tokenize_sentence(text: str) -> list[str]:
    for pattern, repl in _STARTING:
        text = pattern.sub(repl, text)
    for pattern, repl in _PUNCTUATION:
        text = pattern.sub(repl, text)
    for pattern, repl in (_BRACKETS, _DASHES):
        text = pattern.sub(repl, text)
    text = f" {text} "
    for pattern, repl in _ENDING:
        text = pattern.sub(repl, text)
    for pattern in _SPLIT_WORDS:
        text = pattern.sub(lambda m: " " + " ".join(m.groups()) + " ", text)
    return text.split()


def word_tokenize(text: str) -> list[str]:
    """Treebank-style tokens of ``text``: sentences first, then punctuation and contractions split."""
    tokens: list[str] = []
    for sentence in split_sentences(text):
        tokens.extend(_tokenize_sentence(sentence))
    return tokens
