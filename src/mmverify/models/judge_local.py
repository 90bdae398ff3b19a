"""A VLM judge running in this process with transformers (Qwen2.5-VL-class chat models).

Selected with ``--vlm-model transformers:<local folder or hub id>``.  Weights load from a local
folder or the local Hugging Face cache only (``mmverify models fetch`` style: never during
scoring).  Decoding is greedy, so a reply depends only on the checkpoint, the device type it runs
on (greedy decoding can pick another token when the last bits of the logits differ), prompt and
pixels, and replies are cached under the checkpoint's content fingerprint and that device type.
In a worker of ``--model-process`` the model process generates (:mod:`.served`); the worker's copy
keeps the cache, the counters and the checks, and sends its item's deadline with each question: the
model process does not generate a question whose item has run out of time, and cuts a generation
when it does (answering it as a timeout: a reply cut short is never returned).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, ClassVar, Iterable, Sequence

import numpy as np

from ..core.errors import ErrorCode, ScoringError
from ..core.waits import await_own_timeout, shared_clock, shared_due
from .base import Backend
from .compute_locks import computing
from .judge_cache import JudgeCache
from .judge_config import LOCAL_PREFIX
from .judge_usage import JudgeUsage, judge_identity, usage_for
from .judge_wire import RequestLike, ask_in_order, check_image, request_key


class TransformersVLMJudge(Backend):
    name: ClassVar[str] = "transformers-vlm"
    capability: ClassVar[str] = "vlm"
    packages: ClassVar[tuple[str, ...]] = ("torch", "transformers")
    servable: ClassVar[bool] = True  # a worker's copy keeps the cache and counts; the model process generates

    def __init__(self, source: str | None = None, device: str | None = None, *, cache: JudgeCache | None = None) -> None:
        super().__init__(source, device, batch_size=1)
        self.cache = cache
        self._model: Any = None
        self._processor: Any = None
        self.usage: JudgeUsage = usage_for(judge_identity(f"{LOCAL_PREFIX}{self.source}", None))
        self.role: str | None = None  # a role configured with this judge: how a model process finds its copy

    @property
    def model_id(self) -> str:
        """Backend name + checkpoint digest + device type (``;device=cpu``), so another checkpoint or
        device type never reuses cached replies; known without loading the weights."""
        return self.fingerprint

    def _load(self, path: Path) -> None:
        import torch
        import transformers
        from transformers import AutoProcessor

        try:
            from transformers import AutoModelForImageTextToText as AutoVLM
        except ImportError:  # transformers < 4.46
            from transformers import AutoModelForVision2Seq as AutoVLM

        # float32 on CPU (bf16 matmuls are slow there); the checkpoint's own dtype on accelerators
        dtype: Any = torch.float32 if self.device == "cpu" else "auto"
        dtype_arg = "dtype" if int(transformers.__version__.split(".")[0]) >= 5 else "torch_dtype"
        self._processor = AutoProcessor.from_pretrained(path, local_files_only=True)
        model = AutoVLM.from_pretrained(path, local_files_only=True, **{dtype_arg: dtype})
        self._model = model.to(self.device).eval()

    def ask(self, prompt: str, images: Sequence[np.ndarray] = (), *, max_tokens: int = 1024) -> str:
        if max_tokens < 1:
            raise ValueError("max_tokens must be >= 1")
        images = [check_image(image) for image in images]
        # the key needs only the checkpoint's fingerprint: a cache hit never loads the weights
        key = request_key(self.model_id, prompt, images, {"decoding": "greedy", "max_tokens": max_tokens})
        if self.cache is not None:
            cached = self.cache.get(key)
            if cached is not None:
                self.usage.cache_hit()
                return cached
        self.ensure_loaded()
        self.usage.request()
        try:
            if self.server is None:
                # one generate at a time (the model is shared by every thread), waited for in steps:
                # an item's deadline lands in the wait, and in the generation between two tokens
                with computing(self):
                    reply, tokens = self._generate(prompt, images, max_tokens)
            else:  # generated in the model process, the same way (see .served), within the item's time
                compute = self.server.computation(self, ("generate", max_tokens))
                try:
                    [(reply, tokens)] = compute.finish(compute.launch([(prompt, images, shared_due())]))
                except ScoringError as exc:
                    if exc.code == ErrorCode.TIMEOUT:  # the model process saw the deadline pass: the
                        await_own_timeout()  # item gets its own timeout, as any late item, when it lands
                    raise
            if not reply.strip():
                raise ScoringError(ErrorCode.JUDGE_FAILED, f"{self.model_id}: empty reply")
        except BaseException:
            self.usage.failure()
            raise
        self.usage.reply(tokens)
        if self.cache is not None:
            self.cache.put(key, self.model_id, reply)
        return reply

    def computation(self, kind: Any) -> Any:
        """``("generate", max_tokens)``: each (prompt, images, due) request's reply and token counts,
        where ``due`` is when its item runs out of time (:func:`~mmverify.core.waits.shared_clock`;
        None: never).  A request past it is not generated, and one that reaches it is cut there:
        either is a ``timeout`` error, never a reply cut short (:meth:`ask` sends one request a call,
        which that error fails)."""
        name, max_tokens = kind
        if name != "generate":
            raise ValueError(f"{self.name} has no computation {kind!r}")

        def generate(requests: list[tuple[str, list[np.ndarray], float | None]]) -> list[tuple[str, tuple[int, int]]]:
            self.ensure_loaded()
            return [self._generate(prompt, list(images), max_tokens, due) for prompt, images, due in requests]

        return generate

    def _generate(
        self, prompt: str, images: list[np.ndarray], max_tokens: int, due: float | None = None
    ) -> tuple[str, tuple[int, int]]:
        """The reply, and its (prompt, completion) token counts; generated until ``due`` at the
        latest (see :meth:`computation`)."""
        import torch
        from PIL import Image
        from transformers import StoppingCriteriaList

        stop = _StopAt(due)
        if stop.passed():
            raise ScoringError(ErrorCode.TIMEOUT, f"{self.model_id}: the question's item ran out of time before it was generated")

        content: list[dict[str, Any]] = [{"type": "image"} for _ in images]
        content.append({"type": "text", "text": prompt})
        text = self._processor.apply_chat_template([{"role": "user", "content": content}], add_generation_prompt=True, tokenize=False)
        pil = [Image.fromarray(np.asarray(image)).convert("RGB") for image in images]
        inputs = self._processor(text=[text], images=pil or None, return_tensors="pt").to(self.device)
        with torch.inference_mode():
            output = self._model.generate(
                **inputs, max_new_tokens=max_tokens, do_sample=False, num_beams=1, stopping_criteria=StoppingCriteriaList([stop])
            )
        if stop.fired or stop.passed():  # a reply finished past the deadline is no one's either
            raise ScoringError(ErrorCode.TIMEOUT, f"{self.model_id}: the question's item ran out of time while it was generated")
        prompt_tokens = int(inputs["input_ids"].shape[1])
        new_tokens = output[:, prompt_tokens:]
        reply = str(self._processor.batch_decode(new_tokens, skip_special_tokens=True)[0])
        return reply, (prompt_tokens, int(new_tokens.shape[1]))

    async def aask(self, prompt: str, images: Sequence[np.ndarray] = (), *, max_tokens: int = 1024) -> str:
        return await asyncio.to_thread(self.ask, prompt, images, max_tokens=max_tokens)

    def ask_many(self, requests: Iterable[RequestLike], *, return_exceptions: bool = False) -> list[Any]:
        """One question after another: a single in-process model gains nothing from threads."""
        return ask_in_order(self, requests, return_exceptions=return_exceptions)


class _StopAt:
    """A stopping criterion of ``generate``: the generation ends after the token during which
    ``due`` (:func:`~mmverify.core.waits.shared_clock`) passed, and :attr:`fired` tells so."""

    def __init__(self, due: float | None) -> None:
        self.due = due
        self.fired = False

    def passed(self) -> bool:
        return self.due is not None and shared_clock() >= self.due

    def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
        import torch

        self.fired = self.fired or self.passed()
        return torch.full((input_ids.shape[0],), self.fired, dtype=torch.bool, device=input_ids.device)
