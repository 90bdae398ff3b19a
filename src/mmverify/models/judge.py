"""VLM / LLM judges: an OpenAI-compatible chat-completions client, a reply cache, and judge roles.

:class:`OpenAICompatibleJudge` speaks ``POST {base_url}/chat/completions`` and so works with OpenAI,
Gemini's OpenAI-compatible endpoint and vLLM / SGLang serving Qwen2.5-VL.  Scores must be
reproducible, so every request uses temperature 0 and top_p 1 (plus an optional seed), images are
encoded to PNG deterministically, and replies are cached on disk by content: a rerun with a warm
cache makes no network call at all.  A judge that cannot answer raises a ``judge_failed``
:class:`ScoringError` -- an empty string never stands in for an answer.

Which judge answers which question is chosen by *role*: ``default``, ``spatial``, ``ocr``,
``ocr_second`` (the second reader of Chinese text) and ``llm`` (text-only questions).  Each role
falls back to ``default`` unless configured.  Configuration lives in environment variables so that
worker processes inherit it (``mmverify score --vlm-*`` sets them):

==================================  ===========================================================
``MMVERIFY_VLM_BASE_URL``           endpoint, e.g. ``http://127.0.0.1:8000/v1``
``MMVERIFY_VLM_MODEL``              model name there, or ``transformers:<path or hub id>`` to run
                                    a Qwen2.5-VL-class model in this process
``MMVERIFY_VLM_API_KEY_ENV``        name of the variable holding the API key (``OPENAI_API_KEY``)
``MMVERIFY_VLM_<ROLE>_BASE_URL``    per-role endpoint (ROLE in upper case, e.g. ``OCR_SECOND``)
``MMVERIFY_VLM_<ROLE>_MODEL``       per-role model
``MMVERIFY_VLM_<ROLE>_API_KEY_ENV`` per-role key variable
``MMVERIFY_VLM_CONCURRENCY``        requests in flight per endpoint and process (8)
``MMVERIFY_VLM_TIMEOUT``            seconds per request (120)
``MMVERIFY_VLM_MAX_RETRIES``        retries after the first attempt (4)
``MMVERIFY_VLM_BACKOFF``            first back-off delay in seconds, doubling per retry (1)
``MMVERIFY_VLM_CACHE``              reply cache file, or ``off`` (``<cache dir>/judge.sqlite``)
==================================  ===========================================================
"""

from __future__ import annotations

import asyncio
import email.utils
import hashlib
import io
import ipaddress
import os
import threading
import time
import weakref
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence, Union
from urllib.parse import urlsplit

import numpy as np

from ..core.errors import ErrorCode, ScoringError
from ..core.hashing import digest_of
from .base import ModelUnavailable
from .cache import SQLiteStore, array_digest
from .judge_config import (  # noqa: F401  (re-exported: callers import configuration from here too)
    DEFAULT_API_KEY_ENV,
    ENV_PREFIX,
    LOCAL_PREFIX,
    NOT_CONFIGURED,
    ROLES,
    JudgeConfig,
    _offline_from_env,
    apply_cli_options,
    build_judge,
    check_role,
    config_from_env,
    judge_identities,
    parse_role_spec,
)

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
    import base64

    return "data:image/png;base64," + base64.b64encode(encode_png(image)).decode("ascii")


def request_key(model_id: str, prompt: str, images: Sequence[np.ndarray], params: Mapping[str, Any]) -> str:
    """Content key of a question: model, prompt, pixels (dtype, shape, bytes) and decoding params."""
    return _key(model_id, prompt, [array_digest(np.asarray(i)) for i in images], params)


def _key(model_id: str, prompt: str, image_digests: list[str], params: Mapping[str, Any]) -> str:
    return digest_of("mmverify-judge/1", model_id, prompt, image_digests, dict(params))


class _EncodedImages:
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


# -- reply cache ----------------------------------------------------------------------------------
_CACHE_SCHEMA = """
CREATE TABLE IF NOT EXISTS replies (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    reply TEXT NOT NULL,
    created REAL NOT NULL
)
"""


class JudgeCache(SQLiteStore):
    """Judge replies on disk (SQLite, WAL): safe for several threads and worker processes.

    Only successful replies are stored, so a failure is retried on the next run.  A broken file
    never costs a reply: a corrupt one is moved aside, an unusable one bypassed, and a failed write
    leaves the reply with its caller (see :class:`~mmverify.models.cache.SQLiteStore`).
    """

    table = "replies"
    schema = _CACHE_SCHEMA

    def get(self, key: str) -> str | None:
        rows = self._read("SELECT reply FROM replies WHERE key = ?", (key,))
        if not rows:
            self.misses += 1
            return None
        self.hits += 1
        return str(rows[0][0])

    def put(self, key: str, model: str, reply: str) -> None:
        self._write(
            "INSERT OR REPLACE INTO replies (key, model, reply, created) VALUES (?, ?, ?, ?)",
            (key, model, reply, time.time()),
        )

    def __len__(self) -> int:
        return self._count()


def _as_cache(cache: JudgeCache | str | Path | None) -> JudgeCache | None:
    return cache if cache is None or isinstance(cache, JudgeCache) else JudgeCache(cache)


# -- retry policy ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Failure:
    detail: str
    retryable: bool
    retry_after: float | None = None


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


def _excerpt(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _EXCERPT else text[:_EXCERPT] + "…"


def reply_from_payload(payload: Any) -> str | _Failure:
    """The assistant text of a chat-completions response, or why there is none."""
    if not isinstance(payload, dict):
        return _Failure(f"response is not a JSON object: {_excerpt(str(payload))}", retryable=True)
    if payload.get("error"):
        return _Failure(f"endpoint returned an error: {_excerpt(str(payload['error']))}", retryable=False)
    choices = payload.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return _Failure(f"response has no choices: {_excerpt(str(payload))}", retryable=True)
    choice = choices[0]
    message = choice.get("message") if isinstance(choice.get("message"), dict) else {}
    content = message.get("content")
    if isinstance(content, list):  # some servers return content parts
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") in (None, "text"))
    if not isinstance(content, str) or not content.strip():
        # at temperature 0 an empty reply comes back empty again: retrying only costs money
        return _Failure(f"empty reply (finish_reason={choice.get('finish_reason')!r})", retryable=False)
    return content


def classify_response(status: int, headers: Mapping[str, str], text: str) -> str | _Failure:
    if status == 200:
        import json

        try:
            payload = json.loads(text)
        except ValueError:
            # a truncated or garbled body is a transport problem, not the model's answer
            return _Failure(f"malformed JSON body: {_excerpt(text)}", retryable=True)
        return reply_from_payload(payload)
    retryable = status in (408, 409, 429) or status >= 500
    return _Failure(f"HTTP {status}: {_excerpt(text)}", retryable, parse_retry_after(headers) if retryable else None)


# -- the OpenAI-compatible client -----------------------------------------------------------------
_SEMAPHORES: dict[tuple[int, str, int], threading.BoundedSemaphore] = {}
_SEMAPHORES_LOCK = threading.Lock()


def _process_semaphore(endpoint: str, limit: int) -> threading.BoundedSemaphore:
    """One bound per endpoint and process, shared by every judge (and role) aimed at it with the
    same limit -- which judges configured from the environment always are."""
    key = (os.getpid(), endpoint, limit)
    with _SEMAPHORES_LOCK:
        if key not in _SEMAPHORES:
            _SEMAPHORES[key] = threading.BoundedSemaphore(limit)
        return _SEMAPHORES[key]


def _is_loopback(url: str) -> bool:
    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass
class _Prepared:
    key: str
    build_body: Callable[[], dict[str, Any]]


class OpenAICompatibleJudge:
    """A judge behind ``POST {base_url}/chat/completions``.

    ``ask`` blocks, bounded by a per-endpoint, process-wide semaphore; ``ask_many`` runs a batch on
    threads under that bound and returns the replies in request order.  ``aask`` / ``aask_many``
    are the asyncio versions for callers inside an event loop (bounded per loop by an
    ``asyncio.Semaphore``).
    """

    def __init__(
        self,
        model: str,
        base_url: str,
        *,
        api_key_env: str = DEFAULT_API_KEY_ENV,
        concurrency: int = 8,
        timeout: float = 120.0,
        max_retries: int = 4,
        backoff_base: float = 1.0,
        backoff_max: float = 30.0,
        retry_after_max: float = 60.0,
        jitter: bool = True,
        seed: int | None = None,
        system_prompt: str | None = None,
        max_tokens_field: str = "max_tokens",
        extra_body: Mapping[str, Any] | None = None,
        cache: JudgeCache | str | Path | None = None,
        offline: bool | None = None,
    ) -> None:
        if concurrency < 1 or max_retries < 0 or timeout <= 0 or backoff_base < 0 or backoff_max < 0 or retry_after_max < 0:
            raise ValueError("concurrency >= 1, max_retries >= 0, timeout > 0 and non-negative back-off are required")
        if not model or not base_url:
            raise ValueError("a judge needs a model name and a base URL")
        self.model = model
        self.model_id = model
        self.base_url = base_url.rstrip("/")
        self.url = self.base_url + "/chat/completions"
        self.api_key_env = api_key_env
        self._api_key = os.environ.get(api_key_env) or None  # read once; never logged or echoed
        self.concurrency = concurrency
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.retry_after_max = retry_after_max
        self.jitter = jitter
        self.seed = seed
        self.system_prompt = system_prompt
        self.max_tokens_field = max_tokens_field
        self.extra_body = dict(extra_body or {})
        self.cache = _as_cache(cache)
        self.offline = _offline_from_env() if offline is None else offline
        self._encoded = _EncodedImages()
        self._clients: dict[int, Any] = {}
        self._clients_lock = threading.Lock()
        self._async_state: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, tuple[Any, asyncio.Semaphore]]" = (
            weakref.WeakKeyDictionary()
        )

    def __repr__(self) -> str:
        return f"OpenAICompatibleJudge(model={self.model!r}, base_url={self.base_url!r})"

    # -- request building -------------------------------------------------------------------------
    def params(self, max_tokens: int) -> dict[str, Any]:
        """Everything besides prompt and images that can change the reply (part of the cache key)."""
        return {
            "temperature": 0, "top_p": 1, "max_tokens": max_tokens, "seed": self.seed,
            "system": self.system_prompt, "extra": self.extra_body, "image_format": "png",
        }  # fmt: skip

    def _prepare(self, prompt: str, images: Sequence[np.ndarray], max_tokens: int) -> _Prepared:
        if max_tokens < 1:
            raise ValueError("max_tokens must be >= 1")
        images = [check_image(i) for i in images]  # refuse bad images before any cache or network use
        digests = [array_digest(i) for i in images]

        def build_body() -> dict[str, Any]:
            # images first, then the question: the order Qwen2.5-VL was trained on, and fine for GPT/Gemini
            if images:
                urls = [self._encoded.get(d, i) for d, i in zip(digests, images)]
                content: Any = [{"type": "image_url", "image_url": {"url": url}} for url in urls]
                content.append({"type": "text", "text": prompt})
            else:
                content = prompt  # plain string: text-only endpoints reject content lists
            messages = [{"role": "system", "content": self.system_prompt}] if self.system_prompt else []
            messages.append({"role": "user", "content": content})
            body: dict[str, Any] = {
                "model": self.model, "messages": messages, "temperature": 0, "top_p": 1,
                self.max_tokens_field: max_tokens, "stream": False,
            }  # fmt: skip
            if self.seed is not None:
                body["seed"] = self.seed
            body.update(self.extra_body)
            return body

        return _Prepared(_key(self.model_id, prompt, digests, self.params(max_tokens)), build_body)

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        return headers

    # -- failure handling -------------------------------------------------------------------------
    def _redact(self, text: str) -> str:
        return text.replace(self._api_key, "***") if self._api_key else text

    def _failed(self, failure: _Failure, attempts: int) -> ScoringError:
        message = f"{self.model} at {self.base_url}: {failure.detail} (after {attempts} attempt{'s' * (attempts > 1)})"
        return ScoringError(ErrorCode.JUDGE_FAILED, self._redact(message))

    def _delay(self, attempt: int, failure: _Failure, key: str) -> float:
        if failure.retry_after is not None:
            return min(failure.retry_after, self.retry_after_max)
        delay = min(self.backoff_max, self.backoff_base * (2**attempt))
        if self.jitter:
            # spread retries of concurrent requests apart, yet identically on every run
            fraction = int(hashlib.sha256(f"{key}:{attempt}".encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
            delay *= 0.5 + 0.5 * fraction
        return delay

    def _check_online(self) -> None:
        if self.offline and not _is_loopback(self.base_url):
            raise ModelUnavailable(
                "vlm", f"offline mode: the reply of {self.model} at {self.base_url} is not in the judge cache"
            )

    @staticmethod
    def _transport_failure(exc: Exception, timeout: float) -> _Failure:
        import httpx

        if isinstance(exc, httpx.TimeoutException):
            return _Failure(f"no reply within {timeout:g} s ({type(exc).__name__})", retryable=True)
        return _Failure(f"connection error: {type(exc).__name__}: {_excerpt(str(exc))}", retryable=True)

    def _cached(self, key: str) -> str | None:
        return self.cache.get(key) if self.cache is not None else None

    def _store(self, key: str, reply: str) -> None:
        if self.cache is not None:
            self.cache.put(key, self.model_id, reply)

    # -- blocking API -----------------------------------------------------------------------------
    def _client(self) -> Any:
        try:
            import httpx
        except ImportError:
            raise ModelUnavailable("vlm", 'the judge client needs httpx; pip install "mmverify[vlm]"') from None
        pid = os.getpid()
        with self._clients_lock:
            if pid not in self._clients:  # a client's pooled sockets must not be shared across a fork
                limits = httpx.Limits(max_connections=self.concurrency, max_keepalive_connections=self.concurrency)
                self._clients[pid] = httpx.Client(timeout=self.timeout, limits=limits)
            return self._clients[pid]

    def ask(self, prompt: str, images: Sequence[np.ndarray] = (), *, max_tokens: int = 1024) -> str:
        prepared = self._prepare(prompt, images, max_tokens)
        cached = self._cached(prepared.key)
        return cached if cached is not None else self._fetch(prepared)

    def _fetch(self, prepared: _Prepared) -> str:
        self._check_online()
        client = self._client()
        body = prepared.build_body()  # PNG encoding happens outside the concurrency bound
        with _process_semaphore(self.base_url, self.concurrency):
            reply = self._send(client, body, prepared.key)
        self._store(prepared.key, reply)
        return reply

    def _send(self, client: Any, body: dict[str, Any], key: str) -> str:
        import httpx

        for attempt in range(self.max_retries + 1):
            try:
                response = client.post(self.url, json=body, headers=self._headers())
                outcome = classify_response(response.status_code, response.headers, response.text)
            except httpx.TransportError as exc:
                outcome = self._transport_failure(exc, self.timeout)
            if isinstance(outcome, str):
                return outcome
            if not outcome.retryable or attempt == self.max_retries:
                raise self._failed(outcome, attempt + 1)
            time.sleep(self._delay(attempt, outcome, key))
        raise AssertionError("unreachable")

    # -- asyncio API ------------------------------------------------------------------------------
    def _loop_state(self) -> tuple[Any, asyncio.Semaphore]:
        try:
            import httpx
        except ImportError:
            raise ModelUnavailable("vlm", 'the judge client needs httpx; pip install "mmverify[vlm]"') from None
        loop = asyncio.get_running_loop()
        state = self._async_state.get(loop)
        if state is None:  # asyncio clients and semaphores belong to one event loop
            limits = httpx.Limits(max_connections=self.concurrency, max_keepalive_connections=self.concurrency)
            state = (httpx.AsyncClient(timeout=self.timeout, limits=limits), asyncio.Semaphore(self.concurrency))
            self._async_state[loop] = state
        return state

    async def aask(self, prompt: str, images: Sequence[np.ndarray] = (), *, max_tokens: int = 1024) -> str:
        prepared = self._prepare(prompt, images, max_tokens)
        cached = self._cached(prepared.key)
        if cached is not None:
            return cached
        self._check_online()
        client, semaphore = self._loop_state()
        # PNG encoding off the event loop, so one batch's encodes overlap with its requests
        body = await asyncio.to_thread(prepared.build_body) if images else prepared.build_body()
        async with semaphore:
            reply = await self._asend(client, body, prepared.key)
        self._store(prepared.key, reply)
        return reply

    async def _asend(self, client: Any, body: dict[str, Any], key: str) -> str:
        import httpx

        for attempt in range(self.max_retries + 1):
            try:
                response = await client.post(self.url, json=body, headers=self._headers())
                outcome = classify_response(response.status_code, response.headers, response.text)
            except httpx.TransportError as exc:
                outcome = self._transport_failure(exc, self.timeout)
            if isinstance(outcome, str):
                return outcome
            if not outcome.retryable or attempt == self.max_retries:
                raise self._failed(outcome, attempt + 1)
            await asyncio.sleep(self._delay(attempt, outcome, key))
        raise AssertionError("unreachable")

    async def aclose(self) -> None:
        """Close this event loop's connection pool (``ask_many`` closes its own)."""
        state = self._async_state.pop(asyncio.get_running_loop(), None)
        if state is not None:
            await state[0].aclose()

    def close(self) -> None:
        with self._clients_lock:
            client = self._clients.pop(os.getpid(), None)
        if client is not None:
            client.close()

    # -- batches ----------------------------------------------------------------------------------
    async def aask_many(self, requests: Iterable[RequestLike], *, return_exceptions: bool = False) -> list[Any]:
        """Concurrent ``aask`` over a batch; identical questions are sent once."""
        items = [as_request(r) for r in requests]
        pending: dict[str, asyncio.Task[str]] = {}
        tasks = []
        for item in items:
            key = self._prepare(item.prompt, item.images, item.max_tokens).key
            if key not in pending:
                pending[key] = asyncio.ensure_future(self.aask(item.prompt, item.images, max_tokens=item.max_tokens))
            tasks.append(pending[key])
        await asyncio.gather(*pending.values(), return_exceptions=True)
        results = [t.exception() or t.result() for t in tasks]
        if not return_exceptions:
            for result in results:
                if isinstance(result, BaseException):
                    raise result
        return results

    def ask_many(self, requests: Iterable[RequestLike], *, return_exceptions: bool = False) -> list[Any]:
        """Replies to ``requests`` in order, at most ``concurrency`` in flight; identical questions
        are sent once and cached ones not at all.

        With ``return_exceptions`` a failed question gives its exception in its slot; otherwise the
        first failure (in request order) is raised once the whole batch has finished.  Threads, not
        the asyncio client: measured, the blocking client costs a quarter of the CPU per request,
        and the process-wide bound then covers every caller.
        """
        items = [as_request(r) for r in requests]
        prepared = [self._prepare(item.prompt, item.images, item.max_tokens) for item in items]
        outcomes: dict[str, Any] = {}
        missing: dict[str, _Prepared] = {}
        for entry in prepared:
            if entry.key not in outcomes and entry.key not in missing:
                cached = self._cached(entry.key)
                if cached is not None:
                    outcomes[entry.key] = cached
                else:
                    missing[entry.key] = entry
        if missing:
            with ThreadPoolExecutor(max_workers=min(self.concurrency, len(missing)), thread_name_prefix="judge") as pool:
                futures = {key: pool.submit(self._fetch, entry) for key, entry in missing.items()}
                for key, future in futures.items():
                    outcomes[key] = future.exception() or future.result()
        results = [outcomes[entry.key] for entry in prepared]
        if not return_exceptions:
            for result in results:
                if isinstance(result, BaseException):
                    raise result
        return results


def ask_many(judge: Any, requests: Iterable[RequestLike], *, return_exceptions: bool = False) -> list[Any]:
    """``judge.ask_many`` when the judge has one, else one ``ask`` after another (e.g. test fakes)."""
    if hasattr(judge, "ask_many"):
        return judge.ask_many(requests, return_exceptions=return_exceptions)
    return ask_in_order(judge, requests, return_exceptions=return_exceptions)


def ask_in_order(judge: Any, requests: Iterable[RequestLike], *, return_exceptions: bool = False) -> list[Any]:
    results: list[Any] = []
    for request in map(as_request, requests):
        try:
            results.append(judge.ask(request.prompt, request.images, max_tokens=request.max_tokens))
        except ScoringError as exc:
            if not return_exceptions:
                raise
            results.append(exc)
    return results
