"""Whisper's removal of bracketed words -- ``[<\\[][^>\\]]*[>\\]]``, then ``\\(([^)]+?)\\)``, each match
replaced -- in time linear in the text's length.

The regular expressions try every opener and, when no closer follows it, scan to the end of the
text before giving up, so a run of unclosed openers took quadratic time (40,000 ``(`` took five
seconds, in native code that no deadline interrupts).  Here an opener with no closer after it ends
the search: no later opener can match either.  The result is the same text.
"""

from __future__ import annotations

import re

_SQUARE_OR_ANGLE = (re.compile(r"[<\[]"), re.compile(r"[>\]]"))
_ROUND = (re.compile(r"\("), re.compile(r"\)"))
DISARMED = "{"  # an unclosable opener's stand-in: another bracket, which Whisper's normaliser also turns into a space


def _substitute(text: str, brackets: tuple[re.Pattern, re.Pattern], replacement: str, nonempty: bool) -> tuple[str, int]:
    """``text`` with every span from an opener to the first closer after it replaced (``nonempty``:
    only spans with something between the two), as ``re.sub`` does it; and where, in the result,
    the text begins whose openers have no closer after them."""
    opener, closer = brackets
    pieces: list[str] = []
    position = 0
    while (opened := opener.search(text, position)) is not None:
        closed = closer.search(text, opened.end())
        if closed is None:  # nothing closes this opener, nor any after it
            break
        if nonempty and closed.start() == opened.end():  # "()": no match here
            pieces.append(text[position : closed.start()])
            position = closed.start()
            continue
        pieces.append(text[position : opened.start()])
        pieces.append(replacement)
        position = closed.end()
    head = "".join(pieces)
    return head + text[position:], len(head)


def drop_bracketed(text: str, replacement: str = "", *, disarm: bool = False) -> str:
    """``text`` with Whisper's two bracket substitutions applied.  ``disarm``: openers left without a
    closer become :data:`DISARMED`, so that Whisper's own normaliser, run on the result, finds
    nothing to remove and scans it in linear time too (its later steps treat both brackets alike)."""
    text, tail = _substitute(text, _SQUARE_OR_ANGLE, replacement, nonempty=False)
    if disarm:
        text = text[:tail] + _SQUARE_OR_ANGLE[0].sub(DISARMED, text[tail:])
    text, tail = _substitute(text, _ROUND, replacement, nonempty=True)
    if disarm:
        text = text[:tail] + text[tail:].replace("(", DISARMED)
    return text
