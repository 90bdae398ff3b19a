"""Reward adapters with the calling conventions of RL frameworks.

* TRL ``GRPOTrainer``: :class:`TRLReward` / :class:`AsyncTRLReward` are reward functions
  ``(prompts, completions, **kwargs) -> list[float | None]``; the instance annotation comes from a
  dataset column (TRL passes every column as a keyword list).
* verl: :func:`compute_score` ``(data_source, solution_str, ground_truth, extra_info=None, **kwargs)
  -> dict`` (``custom_reward_function.path=pkg://mmverify.pipelines.adapters``) and
  :func:`compute_score_batch` for verl's batch reward manager.
* Flow-GRPO / DDPO-style image RL: :class:`FlowGRPOReward` ``(images, prompts, metadata) ->
  (scores, info)``.
* OpenRLHF remote reward: :func:`openrlhf_items` / :func:`openrlhf_response` (from
  :mod:`.openrlhf`) turn the body ``{"query", "prompts", "labels"}`` into items and the reply
  ``{"rewards", "scores", "extra_logs"}`` (the server's ``POST /get_reward``); :func:`reward_func`
  is the same for OpenRLHF's ``--remote_rm_url reward_func.py`` mode.

Error rows follow an explicit policy.  TRL adds reward functions with ``nansum``, so a ``None``
reward adds nothing (the other functions score the sample; alone, it counts as 0): its adapters
default to "none" and log the error rate.  verl, Flow-GRPO and OpenRLHF need a number for every
sample: NaN would poison the group's advantage and 0 would count a scorer failure as a failed
generation, so they default to "raise" and accept "zero" (with the error reported beside the score)
or, except OpenRLHF, "nan" as explicit choices.

How a sample becomes an item, the same for every adapter: :mod:`.adapter_items`.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import math
import threading
from typing import Any, Mapping, Sequence

import numpy as np

from ..core.errors import ErrorCode
from .adapter_items import check_policy, decode_json, guarded_item, with_response
from .openrlhf import END_TOKENS, openrlhf_items, openrlhf_response, response_text, strip_end_tokens
from .reward import Reward, image_part
from .reward_batch import Item, Refused, scores_from_rows

__all__ = [
    "END_TOKENS", "AsyncTRLReward", "FlowGRPOReward", "TRLReward", "completion_parts", "compute_score",
    "compute_score_batch", "openrlhf_items", "openrlhf_response", "response_text", "reward_func", "split_images",
    "strip_end_tokens",
]  # fmt: skip


# -- TRL -------------------------------------------------------------------------------------------


def completion_parts(completion: Any) -> list[Any]:
    """A TRL completion as response parts: a string; a conversation (the assistant messages'
    contents, in order); or a list of parts (strings, PIL images, arrays, manifest parts)."""
    if isinstance(completion, str):
        return [completion]
    if isinstance(completion, Mapping) and "role" in completion:
        completion = [completion]
    if isinstance(completion, (list, tuple)) and completion and all(isinstance(m, Mapping) and "role" in m for m in completion):
        messages = [m for m in completion if m.get("role") == "assistant"] or list(completion)
        parts: list[Any] = []
        for message in messages:
            content = message.get("content")
            if isinstance(content, (list, tuple)):
                parts.extend(content)
            elif content is not None:
                parts.append(content)
        return parts
    if isinstance(completion, (list, tuple)):
        return list(completion)
    return [completion]


class TRLReward:
    """A TRL ``GRPOTrainer`` reward function scoring completions with an mmverify task.

    ``task`` fixes the task; otherwise each row's task comes from the ``task_column`` dataset
    column.  The annotation comes from ``instance_column`` (a dict, or a JSON string -- preferred,
    since Arrow unifies dict columns into structs that add ``None`` fields across tasks).
    """

    def __init__(
        self,
        task: str | Sequence[str] | None = None,
        *,
        reward: Reward | None = None,
        instance_column: str = "instance",
        task_column: str = "task",
        name: str = "mmverify",
        on_error: str = "none",
        **reward_options: Any,
    ) -> None:
        self.reward = reward if reward is not None else Reward(task, **reward_options)
        self.instance_column = instance_column
        self.task_column = task_column
        self.on_error = check_policy(on_error)
        self.__name__ = name  # TRL names reward functions (logs, metrics) by __name__

    def _items(self, prompts: Sequence[Any], completions: Sequence[Any], kwargs: Mapping[str, Any]) -> list[Item]:
        if self.instance_column not in kwargs:
            columns = sorted(k for k in kwargs if k not in ("trainer_state", "log_extra", "log_metric", "completion_ids"))
            raise ValueError(f"no {self.instance_column!r} column in the dataset (columns passed: {columns})")
        instances = kwargs[self.instance_column]
        tasks = kwargs.get(self.task_column) if self.reward.fixed_task is None else None
        if self.reward.fixed_task is None and tasks is None:
            raise ValueError(f"this reward has no fixed task and the dataset has no {self.task_column!r} column")
        if len(instances) != len(completions) or (tasks is not None and len(tasks) != len(completions)):
            raise ValueError("dataset columns and completions differ in length")
        items: list[Item] = []
        for i, completion in enumerate(completions):
            task = tasks[i] if tasks is not None else None
            items.append(guarded_item(task or self.reward.fixed_task, self._item, instances[i], completion, task))
        return items

    def _item(self, instance: Any, completion: Any, task: str | None) -> Item:
        return self.reward.item(decode_json(instance), completion_parts(completion), task=task)

    def score(self, prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any) -> list[float | None]:
        rows = self.reward.rows(self._items(prompts, completions, kwargs))
        scores = scores_from_rows(rows, self.on_error)
        log_metric = kwargs.get("log_metric")
        if callable(log_metric) and rows:
            log_metric(f"{self.__name__}/error_rate", sum(r["status"] == "error" for r in rows) / len(rows))
        return scores

    def __call__(self, prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any) -> list[float | None]:
        return self.score(prompts, completions, **kwargs)


async def _trl_reward_signature(prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any) -> list[float | None]:
    """The signature an :class:`AsyncTRLReward` shows (its code is what marks it as a coroutine)."""
    raise NotImplementedError  # never called: AsyncTRLReward.__call__ runs instead


_FUNCTION_LIKE = ("__code__", "__defaults__", "__kwdefaults__", "__signature__")


class AsyncTRLReward(TRLReward):
    """The same reward as a coroutine (TRL gathers async reward functions concurrently); scoring
    runs in a worker thread so the trainer's event loop stays free.

    TRL releases before its ``is_async_callable`` tell coroutines with ``inspect.iscoroutinefunction``,
    which takes an object for a function only when it carries a function's code and signature
    attributes: each instance carries those of a coroutine with TRL's signature, so every release
    awaits it (they are set again after unpickling, as code objects do not pickle)."""

    def __init__(self, task: str | Sequence[str] | None = None, **options: Any) -> None:
        super().__init__(task, **options)
        self._look_like_a_coroutine()

    def _look_like_a_coroutine(self) -> None:
        self.__code__ = _trl_reward_signature.__code__
        self.__defaults__ = _trl_reward_signature.__defaults__
        self.__kwdefaults__ = _trl_reward_signature.__kwdefaults__
        self.__signature__ = inspect.signature(_trl_reward_signature)

    def __getstate__(self) -> dict[str, Any]:
        return {key: value for key, value in self.__dict__.items() if key not in _FUNCTION_LIKE}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._look_like_a_coroutine()

    async def __call__(self, prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any) -> list[float | None]:  # type: ignore[override]
        return await asyncio.to_thread(self.score, prompts, completions, **kwargs)


# -- verl ------------------------------------------------------------------------------------------

_VERL_OPTIONS = ("on_error", "data_root", "media_root", "timeout", "thresholds", "models", "device", "offline", "cache_dir", "component_keys", "instructions")
_VERL_FIXED_KEYS = ("score", "valid", "passed", "error", "reason", "components")
_REWARDS: dict[str, Reward] = {}
_REWARDS_LOCK = threading.Lock()


def _shared_reward(options: Mapping[str, Any]) -> Reward:
    """One Reward per distinct configuration, kept for the life of the process (verl calls the
    function once per sample, so building the planner each time would dominate the cost)."""
    key = json.dumps(options, sort_keys=True, default=str)
    with _REWARDS_LOCK:
        if key not in _REWARDS:
            _REWARDS[key] = Reward(None, **options)
        return _REWARDS[key]


def _verl_options(kwargs: Mapping[str, Any]) -> tuple[dict[str, Any], str, tuple[str, ...]]:
    # verl also passes keywords of its own (reward_router_address, sandbox_fusion_url, ...): ignored
    options = {k: kwargs[k] for k in _VERL_OPTIONS if k in kwargs and kwargs[k] is not None}
    on_error = check_policy(options.pop("on_error", "raise"), ("raise", "zero", "nan"))
    keys = tuple(options.pop("component_keys", ()) or ())
    clash = sorted(set(keys) & set(_VERL_FIXED_KEYS))
    if clash:
        raise ValueError(f"component_keys may not reuse the result keys {clash}")
    return options, on_error, keys


def _verl_item(reward: Reward, data_source: Any, solution_str: Any, ground_truth: Any, extra_info: Any) -> Item:
    extra = extra_info if isinstance(extra_info, Mapping) else {}
    parts = with_response(extra.get("parts"), solution_str)
    if not isinstance(data_source, str):
        return Refused(ErrorCode.MALFORMED_LINE, f"data_source must be an mmverify task id, got {data_source!r}")
    sample = extra.get("sample", 0)
    sample = sample if isinstance(sample, int) and not isinstance(sample, bool) and sample >= 0 else 0
    return reward.item(decode_json(ground_truth), parts, task=data_source, sample=sample)


def _number(value: Any) -> float:
    """A value verl can average: the number, or NaN for none (verl's validation metrics take the
    mean of every key whose first value is not a string, and None cannot be averaged)."""
    return float(value) if isinstance(value, (int, float)) else math.nan


def _verl_result(row: Mapping[str, Any], score: float | None, component_keys: Sequence[str]) -> dict[str, Any]:
    # verl stacks every key across the batch, so each result carries the same keys, each one type
    scored = row["status"] == "scored"
    result: dict[str, Any] = {
        "score": score,
        "valid": 1.0 if scored else 0.0,
        "passed": _number(row["passed"]),
        "error": "" if scored else row["error"]["code"],
        "reason": row["reason"] or "",
        "components": json.dumps(row["components"], sort_keys=True),
    }
    for name in component_keys:
        result[name] = _number(row["components"].get(name))
    return result


def compute_score_batch(
    data_sources: Sequence[Any],
    solution_strs: Sequence[Any],
    ground_truths: Sequence[Any],
    extra_infos: Sequence[Any] | None = None,
    **kwargs: Any,
) -> list[dict[str, Any]]:
    """verl's batch reward manager convention: lists in, one result dict per sample out."""
    options, on_error, component_keys = _verl_options(kwargs)
    reward = _shared_reward(options)
    extras = list(extra_infos) if extra_infos is not None else [None] * len(data_sources)
    if not (len(data_sources) == len(solution_strs) == len(ground_truths) == len(extras)):
        raise ValueError("data_sources, solution_strs, ground_truths and extra_infos differ in length")
    items = [guarded_item(args[0], _verl_item, reward, *args) for args in zip(data_sources, solution_strs, ground_truths, extras)]
    rows = reward.rows(items)
    scores = scores_from_rows(rows, on_error)
    return [_verl_result(row, score, component_keys) for row, score in zip(rows, scores)]


def compute_score(
    data_source: Any,
    solution_str: Any,
    ground_truth: Any,
    extra_info: Any = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """verl's ``compute_score``: ``data_source`` is the task id, ``ground_truth`` the instance
    annotation (dict or JSON string), ``extra_info["parts"]`` optional response parts in which
    ``{"type": "response"}`` stands for ``solution_str``.  Options (``on_error``, ``data_root``,
    ``component_keys``, ...) come as keyword arguments (verl's ``reward_kwargs``)."""
    return compute_score_batch([data_source], [solution_str], [ground_truth], [extra_info], **kwargs)[0]


# -- Flow-GRPO / DDPO ------------------------------------------------------------------------------


def split_images(images: Any) -> list[Any]:
    """A batch of images as a list: a list/tuple as is; a 4-D array or tensor along its first axis."""
    if isinstance(images, (list, tuple)):
        return list(images)
    shape = getattr(images, "shape", None)
    if shape is None or len(shape) != 4:
        raise ValueError(f"images must be a list or a 4-D batch (NCHW or NHWC), got shape {shape}")
    return [images[i] for i in range(shape[0])]


class FlowGRPOReward:
    """``reward_fn(images, prompts, metadata) -> (scores, info)`` as Flow-GRPO and DDPO call it.

    ``images``: PIL images, uint8 arrays (HWC / NHWC) or float tensors/arrays in [0, 1] (CHW / NCHW;
    mapped as ``round(x * 255)``).  ``layout``: "auto" (tensors channels-first, arrays
    channels-last), "NCHW" or "NHWC".  ``metadata[i]``: the annotation, or ``{"task": ...,
    "instance": {...}}`` (keys configurable).  ``scores``: float64 array; ``info``: rows and errors.
    """

    def __init__(
        self,
        task: str | Sequence[str] | None = None,
        *,
        reward: Reward | None = None,
        instance_key: str = "instance",
        task_key: str = "task",
        layout: str = "auto",
        on_error: str = "raise",
        **reward_options: Any,
    ) -> None:
        if layout not in ("auto", "NCHW", "NHWC"):
            raise ValueError(f"layout must be auto, NCHW or NHWC, got {layout!r}")
        self.reward = reward if reward is not None else Reward(task, **reward_options)
        self.instance_key = instance_key
        self.task_key = task_key
        self.channels_first = {"auto": None, "NCHW": True, "NHWC": False}[layout]
        self.on_error = check_policy(on_error, ("raise", "zero", "nan"))
        self.__name__ = "mmverify"

    def _annotation(self, entry: Any) -> tuple[Any, str | None]:
        entry = decode_json(entry)
        if isinstance(entry, Mapping) and self.instance_key in entry:
            task = entry.get(self.task_key)
            return decode_json(entry[self.instance_key]), task if isinstance(task, str) else None
        task = entry.get(self.task_key) if isinstance(entry, Mapping) else None
        return entry, task if isinstance(task, str) else None

    def _item(self, picture: Any, entry: Any) -> Item:
        annotation, task = self._annotation(entry)
        task = self.reward.fixed_task or task
        if task is None:
            return Refused(ErrorCode.MALFORMED_LINE, f"metadata names no task (key {self.task_key!r})", entry)
        return self.reward.item(annotation, [image_part(picture, self.channels_first, self.reward.limits)], task=task)

    def __call__(self, images: Any, prompts: Sequence[Any], metadata: Sequence[Any], **kwargs: Any) -> tuple[np.ndarray, dict[str, Any]]:
        pictures = split_images(images)
        if isinstance(metadata, Mapping):
            metadata = [metadata] * len(pictures)
        if len(metadata) != len(pictures):
            raise ValueError(f"got {len(metadata)} metadata entries for {len(pictures)} images")
        items = [guarded_item(self.reward.fixed_task, self._item, picture, entry) for picture, entry in zip(pictures, metadata)]
        rows = self.reward.rows(items)
        scores = scores_from_rows(rows, self.on_error)
        info = {
            "rows": rows,
            "valid": np.array([r["status"] == "scored" for r in rows], dtype=bool),
            "error": [None if r["status"] == "scored" else r["error"]["code"] for r in rows],
        }
        return np.asarray(scores, dtype=np.float64), info


# -- OpenRLHF ------------------------------------------------------------------------------------


def reward_func(queries: Sequence[str], prompts: Sequence[str], labels: Sequence[Any], **kwargs: Any) -> dict[str, Any]:
    """OpenRLHF's local reward-function convention (``--remote_rm_url reward_func.py`` where that file
    does ``from mmverify.pipelines.adapters import reward_func``): torch tensors out.  Keyword options
    as for :func:`compute_score` (``on_error`` "raise" or "zero", ``data_root``, ...)."""
    import torch

    options, on_error, _ = _verl_options(kwargs)
    if on_error == "nan":
        raise ValueError("on_error must be raise or zero here")
    reward = _shared_reward(options)
    rows = reward.rows(openrlhf_items({"query": list(queries), "prompts": list(prompts), "labels": list(labels)}))
    reply = openrlhf_response(rows, on_error)
    return {
        "rewards": torch.tensor(reply["rewards"], dtype=torch.float32),
        "scores": torch.tensor(reply["scores"], dtype=torch.float32),
        "extra_logs": {k: torch.tensor(v, dtype=torch.float32) for k, v in reply["extra_logs"].items()},
    }
