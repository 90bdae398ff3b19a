"""The frame of the self-coherence tasks (:mod:`.coherence`; the reasoning tasks in
:mod:`.reasoning` build on it too): reading what the model's text states -- JSON values the
lenient and the published way, ``<count>`` tags, option letters, the older data's ``format``
regexes -- and :class:`CoherenceTask`, which checks the response's shape, reads the claim after
the image and hands it to the judge."""

from __future__ import annotations

import itertools
import json
import re
from abc import abstractmethod
from typing import Any, Callable, ClassVar, Mapping, Sequence

from ..core.errors import GenerationFault
from ..core.types import Check, Instance
from ..models.judge_config import judge_identities
from ..verifiers.vlm.coherence_templates import COHERENCE_TEMPLATE_KEY
from ..verifiers.vlm.record import Verdict
from ..verifiers.vlm.templates import TEMPLATE_KEY, Question
from .base import Task
from .image_judged import JudgeSession, invalid, judge_reading, text_of
from .response import Response

_EXCERPT = 300
MAX_SEARCHED_TEXT = 100_000  # characters of the reply searched for the answer the instruction asked for
MAX_JSON_STARTS = 64


# -- reading the model's text ----------------------------------------------------------------------
def excerpt(text: str, limit: int = _EXCERPT) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[:limit] + "…"


def fault(reason: str, message: str, text: str, **evidence: Any) -> GenerationFault:
    """The model's text does not say what its instruction asked for: its fault, scored 0."""
    return GenerationFault(reason, message, text=excerpt(text), **evidence)


def first_json(text: str, kind: type) -> Any | None:
    """The first JSON value of type ``kind`` (dict or list) that starts at a ``{`` or ``[`` of ``text``.

    The lenient reader: it tries the first :data:`MAX_JSON_STARTS` opening brackets in turn, so it
    also reads ``Here: {"a": "b"}`` after a stray brace in prose, while a reply made of brackets
    cannot cost quadratic time."""
    opener = "{" if kind is dict else "["
    decoder = json.JSONDecoder()
    text = text[:MAX_SEARCHED_TEXT]
    starts = re.finditer(re.escape(opener), text)
    for match in itertools.islice(starts, MAX_JSON_STARTS):
        try:
            value, _ = decoder.raw_decode(text, match.start())
        except (ValueError, RecursionError):  # RecursionError: "[[[[..." nested past the parser's depth
            continue
        if isinstance(value, kind):
            return value
    return None


def _loads(candidate: str) -> Any | None:
    try:
        return json.loads(candidate)
    except (ValueError, RecursionError):
        return None


def published_object(text: str) -> dict[str, Any] | None:
    """The published reader of JSON objects: the span from the first ``{`` to the first ``}`` after it
    (across lines), parsed as it is or else with every run of whitespace made one space; None when
    there is no such span or it does not parse.  Found in linear time (no backtracking regex)."""
    text = text[:MAX_SEARCHED_TEXT]
    start = text.find("{")
    end = text.find("}", start) if start >= 0 else -1
    if end < 0:
        return None
    span = text[start : end + 1]
    value = _loads(span)
    if value is None:
        value = _loads(re.sub(r"\s+", " ", span))
    return value if isinstance(value, dict) else None


def published_list(text: str) -> list[Any] | None:
    """The published reader of JSON lists: the first ``[`` ... ``]`` span that lies on one line (up to
    the first ``]`` after the ``[``), parsed as JSON; None when there is none or it does not parse."""
    text = text[:MAX_SEARCHED_TEXT]
    position = 0
    while True:
        start = text.find("[", position)
        end = text.find("]", start) if start >= 0 else -1
        if end < 0:
            return None
        newline = text.find("\n", start, end)
        if newline < 0:
            value = _loads(text[start : end + 1])
            return value if isinstance(value, list) else None
        position = newline + 1  # every "[" before that line break sees the same "]" across it


def name_key(text: str) -> str:
    """How names are compared by the lenient reader: case and surrounding space do not matter."""
    return " ".join(text.split()).casefold()


def strings_of(value: Any) -> list[str] | None:
    return list(value) if isinstance(value, list) and all(isinstance(v, str) for v in value) else None


_COUNT_EXACT = re.compile(r"<count>(\d+)</count>")
_COUNT_LENIENT = re.compile(r"<count>\s*(\d+)\s*</count>", re.IGNORECASE)


def parse_count(text: str, lenient: bool = True) -> int:
    """N of the first ``<count>N</count>`` (exactly so written unless ``lenient``); GenerationFault
    when there is none or N is not 3..6.  N is the whole number in the tag."""
    match = (_COUNT_LENIENT if lenient else _COUNT_EXACT).search(text[:MAX_SEARCHED_TEXT])
    if match is None:
        raise fault("missing_count", "the text has no <count>N</count>", text)
    count = int(match.group(1))
    if not 2 < count < 7:
        raise fault("count_out_of_range", f"<count>{count}</count> is not more than 2 and less than 7", text, count=count)
    return count


def match_names(names: Sequence[str], wanted: Sequence[str]) -> list[str] | None:
    """``names`` in ``wanted``'s spelling if they are ``wanted`` in some order (case-insensitive), else None."""
    spelling = {name_key(w): w for w in wanted}
    keys = [name_key(n) for n in names]
    if len(keys) != len(wanted) or len(set(keys)) != len(keys) or set(keys) != set(spelling):
        return None
    return [spelling[k] for k in keys]


def same_set(values: Sequence[Any], wanted: Sequence[str]) -> bool:
    """The published comparison: the values, as a set of exact strings, are the wanted set."""
    try:
        return set(values) == set(wanted)
    except TypeError:  # unhashable values (a list where a name belongs)
        return False


def parse_letters(text: str, count: int, letters: str, lenient: bool = True) -> list[str]:
    """The JSON list of ``count`` option letters (e.g. ``["A", "D"]``), upper-cased.

    Lenient: the first JSON list anywhere, each item one of ``letters`` after trimming.  Published:
    the first one-line ``[...]`` span; its items, trimmed, must form a proper subset of ``letters``."""
    value = strings_of(first_json(text, list) if lenient else published_list(text))
    if not value:
        raise fault("missing_letters", 'the text has no JSON list of letters such as ["A", "B"]', text)
    answers = [v.strip().upper() for v in value]
    allowed = set(letters)
    fits = all(len(a) == 1 and a in allowed for a in answers) if lenient else set(answers) < allowed
    if len(answers) != count or not fits:
        raise fault(
            "bad_letters", f"expected {count} letters from {', '.join(letters)}, got {value!r}", text, letters=value
        )
    return answers


_FORMAT_LITERAL = r"(?:\\.|[^\\.*+?\[\]()|])*"  # escaped characters and non-metacharacters ({ } ^ $ too)
_FORMAT_SHAPE = re.compile(rf"{_FORMAT_LITERAL}\(\.\*\??\){_FORMAT_LITERAL}")


def format_regex(instance: Instance, fmt: Any) -> re.Pattern[str]:
    """The instance's ``format`` (older data): literal text around one ``(.*?)`` or ``(.*)`` group.
    Other regexes are refused -- inline instances reach the reward server, and a regex with nested
    quantifiers could take exponential time on a long reply."""
    pattern = text_of(instance, fmt, "format")
    if len(pattern) > 200 or not _FORMAT_SHAPE.fullmatch(pattern):
        raise invalid(instance, f"format must be literal text around one (.*?) or (.*) group, got {pattern!r}")
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise invalid(instance, f"format {pattern!r} is not a regular expression: {exc}") from None


EXPRESSION_SEARCHED = 10_000  # characters searched with a format that is not plain text around its group


def _split_format(pattern: str) -> tuple[str, bool, str]:
    """A format's text before its group, whether the group is lazy, and the text after it."""
    position = 0
    while pattern[position] != "(":  # format_regex admitted it: one group, literals around it
        position += 2 if pattern[position] == "\\" else 1
    end = pattern.index(")", position)
    return pattern[:position], pattern[position:end].endswith("?"), pattern[end + 1 :]


def _plain(fragment: str) -> str | None:
    """The text ``fragment`` matches when it is plain text (punctuation may be escaped); None when it
    holds an anchor, a brace, a class escape (``\\d``) or a line break."""
    text, position = [], 0
    while position < len(fragment):
        char = fragment[position]
        if char == "\\":
            escaped = fragment[position + 1 : position + 2]
            if not escaped or escaped.isalnum() or escaped == "_":
                return None
            text.append(escaped)
            position += 2
            continue
        if char in "^${}":
            return None
        text.append(char)
        position += 1
    found = "".join(text)
    return None if "\n" in found else found


def written_in_format(pattern: re.Pattern[str], text: str) -> str | None:
    """What ``pattern.search(text)`` captures, for a format :func:`format_regex` admitted.  Plain
    text around the group is found in linear time over the first :data:`MAX_SEARCHED_TEXT`
    characters: the expression is tried from every place its opening text occurs, each try running
    to the end of the line (quadratic, in native code no deadline stops).  Other formats are left to
    the expression, over the first :data:`EXPRESSION_SEARCHED` characters."""
    before, lazy, after = _split_format(pattern.pattern)
    prefix, suffix = _plain(before), _plain(after)
    if prefix is None or suffix is None:
        match = pattern.search(text[:EXPRESSION_SEARCHED])
        return match.group(1) if match else None
    text = text[:MAX_SEARCHED_TEXT]
    position = 0
    while (opened := text.find(prefix, position)) >= 0:
        start = opened + len(prefix)
        line_end = text.find("\n", start)
        line_end = len(text) if line_end < 0 else line_end
        closed = text.find(suffix, start, line_end) if lazy else text.rfind(suffix, start, line_end)
        if closed >= 0:
            return text[start:closed]
        if line_end == len(text):
            return None
        position = line_end + 1  # no later opening on this line closes before its end either
    return None


# -- the task frame --------------------------------------------------------------------------------
class CoherenceSession(JudgeSession):
    """A judge session that can also ask questions built elsewhere, with or without the image."""

    def ask_question(self, question: Question, *, step: str, role: str = "default", with_image: bool = True) -> Verdict:
        images = [self.image] if with_image else []
        return self.record.ask(self.judge(role), question, images, step=step, role=role)


def text_after_image(response: Response) -> str:
    """The text parts after the response's (first) image part, joined with newlines."""
    parts = list(response.parts)
    first = next((i for i, part in enumerate(parts) if part.type == "image"), len(parts))
    return "\n".join(part.text for part in parts[first + 1 :] if part.type == "text")


class CoherenceTask(Task):
    """Read the annotation, check the response's shape, read the model's claim from its text, then
    ask the judge.  Subclasses implement :meth:`read`, :meth:`claim` and :meth:`judge`."""

    roles: ClassVar[tuple[str, ...]] = ("default",)
    several_images: ClassVar[bool] = False  # reasoning tasks allow several images and judge the last
    # the published reader (verifiers.vlm.published) of the task's option or list answers, used
    # under mmmg; None where the published code read replies as mmverify does in both profiles
    published_reader: ClassVar[str | None] = None

    def params(self) -> Mapping[str, Any]:
        # which model answers each role is part of the result key: another judge means a rescore
        params: dict[str, Any] = {
            "templates": TEMPLATE_KEY,
            "coherence_templates": COHERENCE_TEMPLATE_KEY,
            "roles": list(self.roles),
            "judges": judge_identities(self.roles),
        }
        if self.published_reader is not None:
            params["judge_reading"] = judge_reading(self)
        if self.several_images:
            params["text_required"] = self.text_required
        return params

    @property
    def text_required(self) -> bool:
        """Whether a several-image response without any text fails (``no_text``).  The published
        shape check of those tasks accepts images alone, so ``mmmg`` reads an empty text; ``strict``
        requires the text the instruction asks for."""
        return self.strict or not self.several_images

    @abstractmethod
    def read(self, instance: Instance) -> Any:
        """The annotation, validated (ScoringError ``invalid_instance`` when it cannot be scored)."""

    @abstractmethod
    def claim(self, spec: Any, text: str) -> Any:
        """What the model's text states (GenerationFault when it does not state it)."""

    @abstractmethod
    def judge(self, spec: Any, claim: Any, session: CoherenceSession) -> Check: ...

    def reply_text(self, response: Response) -> str:
        """The text the claim is read from: all of it for several-image tasks, else the text after the
        image (the instructions ask for the answer after the image)."""
        if not response.text.strip():
            if not self.text_required:
                return ""  # published: an image-only response passes the shape check of these tasks
            raise GenerationFault("no_text", "the response contains no text")
        if self.several_images:
            return response.text
        text = text_after_image(response)
        if not text.strip():
            raise GenerationFault("text_before_image", "the instruction asks for the text after the image; it comes before")
        return text

    def score(self, instance: Instance, response: Response) -> Check:
        spec = self.read(instance)  # a bad annotation is the user's problem, whatever the response
        count = len(response.of_type("image"))
        if count == 0:
            raise GenerationFault("no_image", "the response contains no image")
        if count > 1 and not self.several_images:
            raise GenerationFault("wrong_image_count", f"expected 1 image, got {count}", image_count=count)
        claim = self.claim(spec, self.reply_text(response))
        image = response.images()[-1]
        return self.judge(spec, claim, CoherenceSession(image))


def product_of(
    session: JudgeSession, steps: Sequence[tuple[str, Any]], ask: Callable[[str, Any], bool]
) -> tuple[float, dict[str, float]]:
    """Ask yes/no steps in order; the first No makes the product 0 and the rest are not asked."""
    components: dict[str, float] = {}
    for i, (step, item) in enumerate(steps):
        components[step] = float(ask(step, item))
        if not components[step]:
            session.skip(*(s for s, _ in steps[i + 1 :]))
            return 0.0, components
    return 1.0, components
