"""What a judge question and its answer look like: requests, deterministic image encoding, the
cache key, and reading a chat-completions reply (text, token usage, or why there is none).

The bottom of the judge modules: it imports none of them, so the client (:mod:`.judge`), the
in-process judge (:mod:`.judge_local`) and the retry policy (:mod:`.judge_retry`) can all share it.
"""

from __future__ import annotations

import email.utils
import io
import json
import threading
import time
from collections import OrderedDict
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence, Union

import numpy as np

from ..core.errors import ScoringError
from ..core.hashing import digest_of
from .cache import array_digest

PNG_COMPRESS_LEVEL = 1  # fixed so equal pixels give equal bytes; 3x faster than 6 for ~8% more bytes on photos
_EXCERPT = 300


# -- requests -------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class JudgeRequest:
    """One question: a prompt about zero or more uint8 images (H×W×3 RGB, or H×W grey)."""

    prompt: str
    images: Sequence[np.ndarray] = ()
    max_tokens: int = 1024


RequestLike = Union[JudgeRequest, str, tuple, Mapping[str, Any]]


def as_request(item: RequestLike) -> JudgeRequest:
    """Accept ``JudgeRequest``, a bare prompt, ``(prompt, images[, max_tokens])`` or a dict."""
    if isinstance(item, JudgeRequest):
        return item
    if isinstance(item, str):
        return JudgeRequest(item)
    if isinstance(item, tuple):
        return JudgeRequest(*item)
    if isinstance(item, Mapping):
        return JudgeRequest(**item)
    raise TypeError(f"cannot make a judge request from {type(item).__name__}")


def check_image(image: np.ndarray) -> np.ndarray:
    """The image as a uint8 H×W, H×W×3 or H×W×4 array (H×W×1 becomes H×W); ValueError otherwise."""
    array = np.asarray(image)
    if array.dtype != np.uint8:
        raise ValueError(f"judge images must be uint8 arrays, got {array.dtype}")
    if array.ndim == 3 and array.shape[2] == 1:
        array = array[:, :, 0]
    if not (array.ndim == 2 or (array.ndim == 3 and array.shape[2] in (3, 4))):
        raise ValueError(f"judge images must be H×W, H×W×3 or H×W×4, got shape {array.shape}")
    return array


def encode_png(image: np.ndarray) -> bytes:
    """PNG bytes of a uint8 image; the same pixels always give the same bytes."""
    from PIL import Image

    array = check_image(image)
    buffer = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(array)).save(buffer, format="PNG", compress_level=PNG_COMPRESS_LEVEL)
    return buffer.getvalue()


def image_data_url(image: np.ndarray) -> str:
    """The image as a ``data:image/png;base64,...`` URL (what chat-completions endpoints accept)."""
    import base64

    return "data:image/png;base64," + base64.b64encode(encode_png(image)).decode("ascii")


class EncodedImages:
    """The last few images' data URLs: tasks ask several questions about one image, and PNG
    encoding is the client's largest CPU cost.  Concurrent questions about one image wait for a
    single encode instead of each starting their own."""

    def __init__(self, size: int = 16) -> None:
        self._entries: "OrderedDict[str, Future[str]]" = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def get(self, digest: str, image: np.ndarray) -> str:
        with self._lock:
            entry = self._entries.get(digest)
            owner = entry is None
            if entry is None:
                entry = self._entries[digest] = Future()
                while len(self._entries) > self._size:
                    self._entries.popitem(last=False)
            else:
                self._entries.move_to_end(digest)
        if owner:
            try:
                entry.set_result(image_data_url(image))
            except BaseException as exc:
                with self._lock:
                    self._entries.pop(digest, None)
                entry.set_exception(exc)
        return entry.result()


def request_key(
    model_id: str, prompt: str, images: Sequence[np.ndarray], params: Mapping[str, Any], endpoint: str | None = None
) -> str:
    """Content key of a question: model, endpoint, prompt, pixels (dtype, shape, bytes) and decoding
    params."""
    return key_of(model_id, prompt, [array_digest(np.asarray(i)) for i in images], params, endpoint)


def key_of(
    model_id: str, prompt: str, image_digests: list[str], params: Mapping[str, Any], endpoint: str | None = None
) -> str:
    """:func:`request_key` from image digests already computed (the client digests each image once).

    ``endpoint``: the server's normalised URL (:func:`.judge_endpoint.endpoint_id`), so two servers
    with models of one name never share replies.  None for an in-process judge, whose ``model_id``
    (checkpoint fingerprint and device type) names what answers.
    """
    if endpoint is None:
        return digest_of("mmverify-judge/1", model_id, prompt, image_digests, dict(params))
    return digest_of("mmverify-judge/2", model_id, endpoint, prompt, image_digests, dict(params))


# -- replies --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Failure:
    """Why an attempt brought no answer, and whether another attempt may bring one."""

    detail: str
    retryable: bool
    retry_after: float | None = None


@dataclass(frozen=True)
class Answer:
    """The assistant's text, and ``(prompt_tokens, completion_tokens)`` when the server said."""

    text: str
    tokens: tuple[int, int] | None = None


def parse_retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds to wait from ``retry-after-ms`` / ``Retry-After`` (seconds or an HTTP date)."""
    lowered = {k.lower(): v for k, v in headers.items()}
    if "retry-after-ms" in lowered:
        try:
            return max(0.0, float(lowered["retry-after-ms"]) / 1000.0)
        except ValueError:
            pass
    value = lowered.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def excerpt(text: str) -> str:
    """``text`` on one line, cut to a length fit for an error message."""
    text = " ".join(text.split())
    return text if len(text) <= _EXCERPT else text[:_EXCERPT] + "…"


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def tokens_from_payload(payload: Mapping[str, Any]) -> tuple[int, int] | None:
    """``(prompt_tokens, completion_tokens)`` of an OpenAI ``usage`` object; None when the server
    reported no usable counts (unknown, which is not zero)."""
    usage = payload.get("usage")
    if not isinstance(usage, Mapping):
        return None
    prompt, completion = _count(usage.get("prompt_tokens")), _count(usage.get("completion_tokens"))
    return None if prompt is None or completion is None else (prompt, completion)


def reply_from_payload(payload: Any) -> Answer | Failure:
    """The assistant text of a chat-completions response (with its token usage), or why there is none."""
    if not isinstance(payload, dict):
        return Failure(f"response is not a JSON object: {excerpt(str(payload))}", retryable=True)
    if payload.get("error"):
        return Failure(f"endpoint returned an error: {excerpt(str(payload['error']))}", retryable=False)
    choices = payload.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return Failure(f"response has no choices: {excerpt(str(payload))}", retryable=True)
    choice = choices[0]
    message = choice.get("message") if isinstance(choice.get("message"), dict) else {}
    content = message.get("content")
    if isinstance(content, list):  # some servers return content parts
        content = "".join(
            p["text"] for p in content if isinstance(p, dict) and p.get("type") in (None, "text") and isinstance(p.get("text"), str)
        )
    if not isinstance(content, str) or not content.strip():
        # at temperature 0 an empty reply comes back empty again: retrying only costs money
        return Failure(f"empty reply (finish_reason={choice.get('finish_reason')!r})", retryable=False)
    return Answer(content, tokens_from_payload(payload))


def classify_response(status: int, headers: Mapping[str, str], text: str) -> Answer | Failure:
    """What one HTTP response means: an answer, or a failure that may be worth retrying."""
    if status == 200:
        try:
            payload = json.loads(text)
        except (ValueError, RecursionError):  # RecursionError: a body nested past the parser's depth
            # a truncated or garbled body is a transport problem, not the model's answer
            return Failure(f"malformed JSON body: {excerpt(text)}", retryable=True)
        return reply_from_payload(payload)
    retryable = status in (408, 409, 429) or status >= 500
    return Failure(f"HTTP {status}: {excerpt(text)}", retryable, parse_retry_after(headers) if retryable else None)


# -- asking any judge -----------------------------------------------------------------------------
def ask_many(judge: Any, requests: Iterable[RequestLike], *, return_exceptions: bool = False) -> list[Any]:
    """``judge.ask_many`` when the judge has one, else one ``ask`` after another (e.g. test fakes)."""
    if hasattr(judge, "ask_many"):
        return judge.ask_many(requests, return_exceptions=return_exceptions)
    return ask_in_order(judge, requests, return_exceptions=return_exceptions)


def ask_in_order(judge: Any, requests: Iterable[RequestLike], *, return_exceptions: bool = False) -> list[Any]:
    """One ``ask`` after another; with ``return_exceptions`` a judge failure fills its slot."""
    results: list[Any] = []
    for request in map(as_request, requests):
        try:
            results.append(judge.ask(request.prompt, request.images, max_tokens=request.max_tokens))
        except ScoringError as exc:
            if not return_exceptions:
                raise
            results.append(exc)
    return results
