"""VLM / LLM judges: an OpenAI-compatible chat-completions client, a reply cache, and judge roles.

This module is the client and the one place judges are built (:func:`build_judge`); it re-exports
the names of the modules it composes -- :mod:`.judge_wire` (requests, image encoding, replies),
:mod:`.judge_retry`, :mod:`.judge_cache`, :mod:`.judge_usage`, :mod:`.judge_config` and
:mod:`.judge_local` -- none of which imports it back.  It also uses :mod:`.judge_endpoint` (the
per-endpoint concurrency bound and loopback check).

:class:`OpenAICompatibleJudge` speaks ``POST {base_url}/chat/completions`` and so works with OpenAI,
Gemini's OpenAI-compatible endpoint and vLLM / SGLang serving Qwen2.5-VL.  Scores must be
reproducible, so every request uses temperature 0 and top_p 1 (plus an optional seed), images are
encoded to PNG deterministically, and replies are cached on disk by content (model name, endpoint,
prompt, pixels, decoding parameters): a rerun with a warm cache makes no network call at all, and
two servers with models of the same name never share replies.  A judge that cannot answer raises a ``judge_failed``
:class:`ScoringError` -- an empty string never stands in for an answer.

Which judge answers which question (its *role*) and how each is configured: :mod:`.judge_config`.
"""

from __future__ import annotations

import asyncio
import math
import os
import threading
import time
import weakref
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from ..core.errors import ErrorCode, ScoringError
from .base import ModelUnavailable
from .cache import array_digest
from .judge_cache import JudgeCache, as_cache
# re-exported, so callers import configuration and the request/reply names from here too
from .judge_config import (
    DEFAULT_API_KEY_ENV, ENV_PREFIX, LOCAL_PREFIX, NOT_CONFIGURED, ROLES, JudgeConfig, apply_cli_options, check_role,
    config_from_env, judge_identities, offline_from_env, parse_role_spec,
)  # fmt: skip
from .judge_endpoint import credentials_of, endpoint_id, is_loopback, process_semaphore, without_credentials
from .judge_local import TransformersVLMJudge
from .judge_retry import RetryPolicy
from .judge_usage import judge_identity, usage_for
from .judge_wire import (
    PNG_COMPRESS_LEVEL, Answer, EncodedImages, Failure, JudgeRequest, RequestLike, as_request, ask_in_order, ask_many,
    check_image, classify_response, encode_png, excerpt, image_data_url, key_of, parse_retry_after, reply_from_payload,
    request_key,
)  # fmt: skip

_Failure = Failure  # the name this module used before the split
__all__ = [
    "DEFAULT_API_KEY_ENV", "ENV_PREFIX", "LOCAL_PREFIX", "NOT_CONFIGURED", "PNG_COMPRESS_LEVEL", "ROLES", "Answer", "EncodedImages",
    "Failure", "JudgeCache", "JudgeConfig", "JudgeRequest", "OpenAICompatibleJudge", "RequestLike", "RetryPolicy",
    "TransformersVLMJudge", "apply_cli_options", "as_request", "ask_in_order", "ask_many", "build_judge", "check_image",
    "check_role", "classify_response", "config_from_env", "encode_png", "image_data_url", "judge_identities",
    "offline_from_env", "parse_retry_after", "parse_role_spec", "reply_from_payload", "request_key",
]  # fmt: skip


@dataclass
class _Prepared:
    key: str
    build_body: Callable[[], dict[str, Any]]


class OpenAICompatibleJudge:
    """A judge behind ``POST {base_url}/chat/completions``.

    ``ask`` blocks, bounded by a per-endpoint, process-wide semaphore; ``ask_many`` runs a batch on
    threads under that bound and returns the replies in request order.  ``aask`` / ``aask_many``
    are the asyncio versions for callers inside an event loop (bounded per loop by an
    ``asyncio.Semaphore``).  Both retry under one :class:`~.judge_retry.RetryPolicy` and count what
    they do in ``usage`` (shared by every judge of the same model and endpoint in the process).
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
        if concurrency < 1 or max_retries < 0 or not 0 < timeout < math.inf or backoff_base < 0 or backoff_max < 0 or retry_after_max < 0:
            raise ValueError("concurrency >= 1, max_retries >= 0, a finite timeout > 0 and non-negative back-off are required")
        if not model or not base_url:
            raise ValueError("a judge needs a model name and a base URL")
        self.model = model
        self.model_id = model
        self.base_url = base_url.rstrip("/")
        self.shown_url = without_credentials(self.base_url)  # what messages show: never user:password@
        userinfo = credentials_of(self.base_url) or ""
        password = userinfo.partition(":")[2]  # alone too, as an error may quote it; not a short one
        self._secrets = [secret for secret in (userinfo, password if len(password) >= 6 else "") if secret]
        self.endpoint = endpoint_id(self.base_url)  # part of every reply's cache key
        self.url = self.base_url + "/chat/completions"
        self.api_key_env = api_key_env
        self._api_key = os.environ.get(api_key_env) or None  # read once; never logged or echoed
        self.concurrency = concurrency
        self.timeout = timeout
        self.retry = RetryPolicy(max_retries, backoff_base, backoff_max, retry_after_max, jitter)
        self.seed = seed
        self.system_prompt = system_prompt
        self.max_tokens_field = max_tokens_field
        self.extra_body = dict(extra_body or {})
        self.cache = as_cache(cache)
        self.offline = offline_from_env() if offline is None else offline
        self.usage = usage_for(judge_identity(self.model, self.shown_url))
        self._encoded = EncodedImages()
        self._clients: dict[int, Any] = {}
        self._clients_lock = threading.Lock()
        self._async_state: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, tuple[Any, asyncio.Semaphore]]" = (
            weakref.WeakKeyDictionary()
        )

    def __repr__(self) -> str:
        return f"OpenAICompatibleJudge(model={self.model!r}, base_url={self.shown_url!r})"

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

        return _Prepared(key_of(self.model_id, prompt, digests, self.params(max_tokens), self.endpoint), build_body)

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        return headers

    # -- failure handling -------------------------------------------------------------------------
    def _redact(self, text: str) -> str:
        for secret in (self._api_key, *self._secrets):
            if secret:
                text = text.replace(secret, "***")
        return text

    def _failed(self, failure: Failure, attempts: int) -> ScoringError:
        self.usage.failure()
        message = f"{self.model} at {self.shown_url}: {failure.detail} (after {attempts} attempt{'s' * (attempts > 1)})"
        return ScoringError(ErrorCode.JUDGE_FAILED, self._redact(message))

    def _delay(self, attempt: int, failure: Failure, key: str) -> float:
        return self.retry.delay(attempt, failure, key)

    def _check_online(self) -> None:
        if self.offline and not is_loopback(self.base_url):
            raise ModelUnavailable(
                "vlm", f"offline mode: the reply of {self.model} at {self.shown_url} is not in the judge cache"
            )

    @staticmethod
    def _request_failure(exc: Exception, timeout: float) -> Failure:
        import httpx

        if isinstance(exc, httpx.TimeoutException):
            return Failure(f"no reply within {timeout:g} s ({type(exc).__name__})", retryable=True)
        if isinstance(exc, httpx.UnsupportedProtocol):  # a base URL without http(s): retrying cannot help
            return Failure(f"unusable base URL: {excerpt(str(exc))}", retryable=False)
        if isinstance(exc, httpx.TooManyRedirects):  # the endpoint's own configuration: it will redirect again
            return Failure(f"too many redirects: {excerpt(str(exc))}", retryable=False)
        # connections refused or reset, and bodies garbled on the way (DecodingError)
        return Failure(f"connection error: {type(exc).__name__}: {excerpt(str(exc))}", retryable=True)

    def _cached(self, key: str) -> str | None:
        reply = self.cache.get(key) if self.cache is not None else None
        if reply is not None:
            self.usage.cache_hit()
        return reply

    def _answered(self, key: str, answer: Answer) -> str:
        self.usage.reply(answer.tokens)
        if self.cache is not None:
            self.cache.put(key, self.model_id, answer.text)
        return answer.text

    def _limits(self) -> Any:
        try:
            import httpx
        except ImportError:
            raise ModelUnavailable("vlm", 'the judge client needs httpx; pip install "mmverify[vlm]"') from None
        return httpx.Limits(max_connections=self.concurrency, max_keepalive_connections=self.concurrency)

    # -- blocking API -----------------------------------------------------------------------------
    def _client(self) -> Any:
        limits = self._limits()
        pid = os.getpid()
        with self._clients_lock:
            if pid not in self._clients:  # a client's pooled sockets must not be shared across a fork
                import httpx

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
        with process_semaphore(self.base_url, self.concurrency):
            answer = self._send(client, body, prepared.key)
        return self._answered(prepared.key, answer)

    def _send(self, client: Any, body: dict[str, Any], key: str) -> Answer:
        import httpx

        def attempt() -> Answer | Failure:
            try:
                response = client.post(self.url, json=body, headers=self._headers())
            except httpx.RequestError as exc:  # transport errors, undecodable bodies, redirect loops
                return self._request_failure(exc, self.timeout)
            return classify_response(response.status_code, response.headers, response.text)

        self.usage.request()
        return self.retry.call(attempt, key, sleep=time.sleep, give_up=self._failed, on_retry=self.usage.retry)

    # -- asyncio API ------------------------------------------------------------------------------
    def _loop_state(self) -> tuple[Any, asyncio.Semaphore]:
        limits = self._limits()
        loop = asyncio.get_running_loop()
        state = self._async_state.get(loop)
        if state is None:  # asyncio clients and semaphores belong to one event loop
            import httpx

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
            answer = await self._asend(client, body, prepared.key)
        return self._answered(prepared.key, answer)

    async def _asend(self, client: Any, body: dict[str, Any], key: str) -> Answer:
        import httpx

        async def attempt() -> Answer | Failure:
            try:
                response = await client.post(self.url, json=body, headers=self._headers())
            except httpx.RequestError as exc:  # transport errors, undecodable bodies, redirect loops
                return self._request_failure(exc, self.timeout)
            return classify_response(response.status_code, response.headers, response.text)

        self.usage.request()
        return await self.retry.acall(attempt, key, sleep=asyncio.sleep, give_up=self._failed, on_retry=self.usage.retry)

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
        return _in_order([t.exception() or t.result() for t in tasks], return_exceptions)

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
        return _in_order([outcomes[entry.key] for entry in prepared], return_exceptions)


def _in_order(results: list[Any], return_exceptions: bool) -> list[Any]:
    """``results``, or the first exception among them raised when they are not to be returned."""
    if not return_exceptions:
        for result in results:
            if isinstance(result, BaseException):
                raise result
    return results


# -- building judges from configuration -----------------------------------------------------------
_CACHES: dict[str, JudgeCache] = {}
_CACHES_LOCK = threading.Lock()


def build_judge(config: JudgeConfig) -> Any:
    """A judge instance for ``config`` (no network and no weights touched yet)."""
    cache = None
    if config.cache is not None:
        with _CACHES_LOCK:  # judges sharing a file share one cache object (and its connections)
            if config.cache not in _CACHES:
                _CACHES[config.cache] = JudgeCache(config.cache)
            cache = _CACHES[config.cache]
    if config.is_local:
        return TransformersVLMJudge(config.model[len(LOCAL_PREFIX) :], cache=cache)
    assert config.base_url is not None
    return OpenAICompatibleJudge(
        config.model,
        config.base_url,
        api_key_env=config.api_key_env,
        concurrency=config.concurrency,
        timeout=config.timeout,
        max_retries=config.max_retries,
        backoff_base=config.backoff,
        cache=cache,
        offline=config.offline,
    )
