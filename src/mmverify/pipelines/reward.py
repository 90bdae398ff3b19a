"""Deterministic rewards for RL: score batches of (instance annotation, response parts) in-process.

    from mmverify.pipelines.reward import Reward
    reward = Reward("i_format_border")
    batch = reward([({"color": "green"}, [pil_image])])
    batch.scores[0], batch.rows[0]["components"]

A :class:`Reward` plans every item with the pipeline's :class:`~mmverify.pipelines.plan.Planner` and
scores it with :func:`~mmverify.pipelines.execute.score_item`, so a reward row is exactly the row
``mmverify score`` writes for the same generation.  Rows that end in ``error`` (the scorer's or the
caller's problem) are mapped by an explicit policy -- by default to ``None``, because a crashed
verifier must never look like a failed generation to the learner.

Response parts may be manifest parts (``{"type": "image", "path": ...}``) or in-memory objects: a
``str`` (text), PIL images, numpy arrays / torch tensors (images), ``(samples, sample_rate)`` tuples
(audio), or encoded ``bytes``.  In-memory media become inline ``data`` parts with a deterministic
encoding (BMP, or PNG with alpha, without metadata; IEEE-float or 16-bit PCM WAV written here,
since libsndfile stamps float WAVs with the current time), so equal inputs give equal bytes, keys
and rows.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from ..core.decoding import INLINE, DecodePool, Decoder
from ..core.errors import ErrorCode
from ..core.hashing import digest_of
from ..core.media import DEFAULT_LIMITS, MediaLimits
from ..core.registry import UnknownIdError
from ..data.instructions import InstructionSet
from ..tasks.catalog import bare_task_id, task_info
from .deadlines import deadline
from .batch import DEFAULT_IN_FLIGHT, score_together
from .context import JudgeOptions, ScoringContext, holding, offer
from .execute import (
    DEFAULT_WARMUP_TIMEOUT, ItemTimeout, check_decode_processes, check_time_limit, error_row as item_error_row, fits, is_warm, score_item, timeout_row,
    warm_up, warmup_timeout_row,
)
from .plan import Planner, WorkItem
from .thresholds import load_thresholds, parse_thresholds
from .reward_batch import (  # noqa: F401  (re-exported: part of the reward API)
    ERROR_POLICIES, ErrorPolicy, Item, Refused, RewardBatch, RewardError, refusal_row, scores_from_rows, unwritable_row,
)  # fmt: skip
from .reward_json import clean_field, describe_exception, loads_json
from .reward_processes import RewardProcesses
from .reward_media import (  # noqa: F401  (re-exported: part of the reward API)
    NON_FINITE_IMAGE, NonFiniteImage, audio_part, image_bytes, image_part, png_bytes, to_part, to_parts, to_uint8_image, wav_bytes,
)  # fmt: skip

DEFAULT_ITEM_TIMEOUT_S = 60.0


# -- the reward -----------------------------------------------------------------------------------


def _validate_task(task_id: str) -> str:
    try:
        info = task_info(task_id)
    except UnknownIdError as exc:
        raise ValueError(str(exc)) from None
    if not info.implemented:
        raise ValueError(f"{info.id} ({info.name}) is not implemented yet; `mmverify tasks` shows what is")
    return info.id


def _content_id(task: str, instance: Any) -> str:
    """``<task>/<digest of the annotation>``: an id that does not depend on where the item sits."""
    try:
        return f"{task}/{digest_of(instance)[:16]}"
    except (TypeError, ValueError, RecursionError):
        return f"{task}/unhashable-instance"


def _task_id(task: Any) -> str | None:
    """The catalog id a manifest's ``task`` value names as the planner reads it (None: no string)."""
    if not isinstance(task, str):
        return None
    return bare_task_id(task.strip())


@dataclass
class Reward:
    """A deterministic reward over one task, a set of tasks, or any task named per item.

    ``task``: a task id (every item is scored by it), a list of ids (items name one of them), or None
    (items name any implemented task).  ``thresholds``: a thresholds file or mapping (sets ``passed``).
    ``media_root``: where relative media paths resolve; ``data_root``: refuse paths that resolve
    outside it; ``allow_paths=False`` refuses every path (inline media only).  ``timeout``: per-item
    seconds.  ``on_error``: "none" (default), "nan", "zero" or "raise".  ``models``, ``device``,
    ``offline``, ``cache_dir``, ``env``, ``precision``, ``references``, ``judge``: the scoring context
    (see :class:`~mmverify.pipelines.context.ScoringContext`; over the environment's settings),
    installed in this process when the reward is built (:attr:`context`).
    ``profile``: "mmmg" (the published evaluator's rules) or "strict" (this project's corrections).
    ``in_flight``: how many items of a batch are scored at once, their model forwards merged into
    shared batches (rows are the same bytes as scored one by one; see :mod:`.batch`).
    ``decode_processes``: processes that decode those items' media (see
    :mod:`mmverify.core.decoding`; the same rows), started as needed and ended by :meth:`close`.
    ``workers``: worker processes that score each call's items (``mmverify score --workers N``'s
    pool, kept between calls, warm); ``model_process``: one more process computes their servable
    models' batches (see :mod:`.model_process`).  Both give the rows of one process; calls on one
    reward from several threads then take turns.  :meth:`close` ends them.
    """

    task: str | Sequence[str] | None = None
    thresholds: Mapping[str, Any] | str | Path | None = None
    instructions: str | Path | InstructionSet | None = None
    media_root: str | Path | None = None
    data_root: str | Path | None = None
    allow_paths: bool = True
    timeout: float | None = DEFAULT_ITEM_TIMEOUT_S
    warmup_timeout: float | None = DEFAULT_WARMUP_TIMEOUT  # a task's first use here (imports, model loading)
    on_error: ErrorPolicy = "none"
    models: str | Sequence[str] | None = None
    device: str | None = None
    offline: bool | None = None
    cache_dir: str | Path | None = None
    env: Mapping[str, str] | None = None
    limits: MediaLimits = DEFAULT_LIMITS
    profile: str = "mmmg"
    precision: str | None = None  # fp32 | bf16 | fp16 for torch backends (default fp32)
    references: str | Sequence[str] | None = None  # reference sets, name=folder
    judge: JudgeOptions | None = None
    in_flight: int = DEFAULT_IN_FLIGHT  # items of a batch scored together, their model calls batched (1: one by one)
    decode_processes: int = 0  # processes decoding the media of items scored together (0: in their threads)
    workers: int = 1  # worker processes scoring the items (1: this process)
    model_process: bool = False  # with workers: one process computes the servable models' batches
    tasks: frozenset[str] | None = field(init=False)  # the tasks this reward scores (None: any)
    fixed_task: str | None = field(init=False)  # the task of items that name none
    context: ScoringContext = field(init=False, repr=False)  # the scoring context installed for this reward
    _planner: Planner = field(init=False, repr=False)
    _decoder: Decoder = field(init=False, repr=False)
    _processes: RewardProcesses = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.in_flight < 1:
            raise ValueError("in_flight must be >= 1")
        check_decode_processes(self.decode_processes, self.in_flight)
        if self.workers < 1:
            raise ValueError("workers must be >= 1")
        if self.model_process and self.workers < 2:
            raise ValueError("a model process serves worker processes (workers > 1)")
        if self.on_error not in ERROR_POLICIES:
            raise ValueError(f"on_error must be one of {', '.join(ERROR_POLICIES)}, got {self.on_error!r}")
        check_time_limit(self.timeout, "timeout")
        check_time_limit(self.warmup_timeout, "warmup_timeout")
        if isinstance(self.task, str):
            self.tasks = frozenset({_validate_task(self.task)})
            self.fixed_task = next(iter(self.tasks))
        elif self.task is not None:
            self.tasks = frozenset(_validate_task(t) for t in self.task)
            if not self.tasks:
                raise ValueError("task must name at least one task (or be None for any task)")
            self.fixed_task = next(iter(self.tasks)) if len(self.tasks) == 1 else None
        else:
            self.tasks, self.fixed_task = None, None
        if isinstance(self.thresholds, (str, Path)):
            threshold_map = load_thresholds(self.thresholds)
        else:
            threshold_map = parse_thresholds(dict(self.thresholds or {}))
        instructions = self.instructions
        if instructions is not None and not isinstance(instructions, InstructionSet):
            instructions = InstructionSet(instructions)
        self.context = ScoringContext(
            models=self.models, references=self.references, device=self.device, precision=self.precision,
            offline=bool(self.offline), cache_dir=self.cache_dir, judge=self.judge or JudgeOptions(), env=self.env,
        )  # fmt: skip
        offer(self.context)  # configures the process now unless other calls are scoring
        root = self.media_root if self.media_root is not None else (self.data_root if self.data_root is not None else ".")
        self._planner = Planner(
            manifest_dir=Path(root),
            instructions=instructions,
            data_root=Path(self.data_root) if self.data_root is not None else None,
            thresholds=threshold_map,
            limits=self.limits,
            profile=self.profile,
            allow_paths=self.allow_paths,
        )
        self._decoder = DecodePool(self.decode_processes) if self.decode_processes and self.workers == 1 else INLINE
        self._processes = RewardProcesses(self)

    def close(self) -> None:
        """End the decoding processes, worker processes and model process (a later call starts new ones)."""
        self._processes.close()
        if isinstance(self._decoder, DecodePool):
            self._decoder.close()
            self._decoder = DecodePool(self.decode_processes)

    def __getstate__(self) -> dict[str, Any]:
        return {key: value for key, value in self.__dict__.items() if key != "_processes"}  # processes stay with their owner

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._processes = RewardProcesses(self)
        offer(self.context)  # a reward unpickled in another process brings its settings along

    # -- building items -----------------------------------------------------------------------------
    def item(
        self,
        instance: Any,
        parts: Any,
        *,
        task: str | None = None,
        sample: int = 0,
        instance_id: str | None = None,
        model: str | None = None,
    ) -> dict[str, Any]:
        """A manifest line for one generation.  Without an ``instance_id`` the id is derived from the
        annotation's content, so neither it nor a scored row's key depends on the item's position
        in a batch."""
        task = task or self.fixed_task
        if task is None:
            raise ValueError(
                "this reward scores several tasks: name the task of each item "
                "(reward(pairs, tasks=[...]), build(..., task=...) or a 'task' field of a manifest line)"
            )
        if isinstance(instance, str):
            try:
                instance = loads_json(instance)
            except json.JSONDecodeError:
                pass  # left as is: the planner reports "'instance' must be an object"
            except RecursionError:
                raise ValueError("the instance annotation is nested too deeply") from None
        if instance_id is None:
            instance_id = _content_id(bare_task_id(task), instance)
        line: dict[str, Any] = {"task": task, "instance_id": instance_id, "instance": instance, "sample": sample}
        if model is not None:
            line["model"] = model
        line["parts"] = to_parts(parts, self.limits)
        return line

    def build(self, instance: Any, parts: Any, *, task: str | None = None, **options: Any) -> Item:
        """:meth:`item`, except that a problem with this one generation (a response part of an
        unsupported type, an unreadable annotation) comes back as a :class:`Refused` entry -- one
        ``malformed_line`` row -- instead of failing the whole batch."""
        try:
            return self.item(instance, parts, task=task, **options)
        except Exception as exc:
            named = task or self.fixed_task
            context = {"task": named, "instance_id": options.get("instance_id") or _content_id(bare_task_id(named), instance)} if isinstance(named, str) else None
            return Refused(ErrorCode.MALFORMED_LINE, f"cannot build this item: {describe_exception(exc)}", context)

    # -- scoring ------------------------------------------------------------------------------------
    def __call__(
        self,
        batch: Iterable[tuple[Any, Any]],
        *,
        tasks: Sequence[str | None] | None = None,
        samples: Sequence[int] | None = None,
    ) -> RewardBatch:
        """Score ``(instance annotation, parts)`` pairs; ``tasks`` names each item's task when the
        reward has no single task."""
        pairs = list(batch)
        if tasks is not None and len(tasks) != len(pairs):
            raise ValueError(f"got {len(tasks)} tasks for {len(pairs)} items")
        if samples is not None and len(samples) != len(pairs):
            raise ValueError(f"got {len(samples)} samples for {len(pairs)} items")
        items = [
            self._build_pair(pair, task=tasks[i] if tasks else None, sample=samples[i] if samples else 0)
            for i, pair in enumerate(pairs)
        ]
        return self.score_items(items, convert=False)

    def _build_pair(self, pair: Any, *, task: str | None, sample: int) -> Item:
        """:meth:`build` of one ``(instance, parts)`` pair; anything else in its place (None, a
        string, a tuple of another length) is that item's ``malformed_line`` row."""
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            named = task or self.fixed_task
            context = {"task": named} if isinstance(named, str) else None
            shown = f"a {type(pair).__name__} of {len(pair)}" if isinstance(pair, (tuple, list)) else f"a {type(pair).__name__}"
            return Refused(ErrorCode.MALFORMED_LINE, f"expected an (instance, parts) pair, got {shown}", context)
        return self.build(pair[0], pair[1], task=task, sample=sample)

    def score_items(self, items: Sequence[Item], *, convert: bool = True) -> RewardBatch:
        """Score manifest-style items (dicts); ``convert`` turns in-memory media in ``parts`` into
        inline data first."""
        rows = self.rows(items, convert=convert)
        return RewardBatch(self.scores(rows), rows)

    def scores(self, rows: Sequence[Mapping[str, Any]], on_error: str | None = None) -> list[float | None]:
        return scores_from_rows(rows, on_error or self.on_error)

    def rows(self, items: Sequence[Item], lines: Sequence[int] | None = None, *, convert: bool = False) -> list[dict[str, Any]]:
        """Result rows in input order; ``lines`` numbers the items (default 1..n), which only
        matters for items without an ``instance_id`` (their default id names the line).

        Every item gets its own row whatever it holds: a value JSON cannot carry (lone surrogates,
        NaN, over-long integers, non-JSON types, deep nesting) makes that item a ``malformed_line``
        row (``invalid_instance`` when it sits in the inline instance), and an unexpected failure
        while planning or scoring one item is that item's ``internal_error`` row; the other items'
        rows are those they would get alone."""
        if lines is not None and len(lines) != len(items):
            raise ValueError(f"got {len(lines)} line numbers for {len(items)} items")
        with holding(self.context):  # this reward's settings and models for the whole call
            planned = [self._plan_one(lines[i] if lines is not None else i + 1, item, convert) for i, item in enumerate(items)]
            if self.workers > 1:
                return self._processes.rows(planned)
            if self.in_flight > 1:
                return list(score_together(planned, self._score, in_flight=self.in_flight, timeout=self.timeout, decoder=self._decoder))
            return [entry if isinstance(entry, dict) else self._score(entry) for entry in planned]

    def _score(self, entry: WorkItem) -> dict[str, Any]:
        """Score one item; a task's first use in this process runs under the warm-up budget, and its
        row is kept when the scoring itself fit the item's limit (as the score executors do)."""
        try:
            if not is_warm(entry):
                try:
                    with deadline(self.warmup_timeout):
                        row, seconds = warm_up(entry)
                except ItemTimeout:
                    return warmup_timeout_row(entry, self.warmup_timeout)
                if fits(seconds, self.timeout):
                    return row
            with deadline(self.timeout):
                return score_item(entry)
        except ItemTimeout:
            return timeout_row(entry, self.timeout)
        except Exception as exc:  # score_item turns failures into rows; this guards the guard
            return item_error_row(entry, ErrorCode.INTERNAL, describe_exception(exc))

    def _plan_one(self, line: int, item: Item, convert: bool) -> WorkItem | dict[str, Any]:
        try:
            return self._plan(line, item, convert)
        except OSError as exc:  # e.g. a media file that exists but cannot be read
            reason = exc.strerror or type(exc).__name__
            return refusal_row(line, item, ErrorCode.MISSING_MEDIA, f"cannot read a media file ({reason})")
        except Exception as exc:
            return refusal_row(line, item, ErrorCode.INTERNAL, f"could not plan this item: {describe_exception(exc)}")

    def _plan(self, line: int, item: Item, convert: bool) -> WorkItem | dict[str, Any]:
        if isinstance(item, Refused):
            return refusal_row(line, item.item, item.code, item.message)
        try:
            if isinstance(item, Mapping) and convert and isinstance(item.get("parts"), (list, tuple)):
                item = {**item, "parts": to_parts(item["parts"], self.limits)}
        except Exception as exc:
            return refusal_row(line, item, ErrorCode.MALFORMED_LINE, f"cannot use these parts: {describe_exception(exc)}")
        if isinstance(item, Mapping) and self.fixed_task is not None and "task" not in item:
            item = {"task": self.fixed_task, **item}
        try:
            # as api.score_items writes it, so keys agree; NaN, Infinity and lone surrogates pass
            # (escaped) to the manifest parser, which refuses them in the fields it reads
            text = json.dumps(item)
        except (TypeError, ValueError, RecursionError) as exc:
            return unwritable_row(line, item, exc)
        refused = self._refuse(line, item)
        if refused is not None:
            return refused
        try:
            planned = self._planner.plan(line, text)
        except ValueError as exc:  # a value the manifest parser let through but could not carry
            return refusal_row(line, item, ErrorCode.MALFORMED_LINE, f"not a valid manifest line: {describe_exception(exc)}")
        assert planned is not None  # the planner filters nothing: no task filter is set
        return planned

    def _refuse(self, line: int, item: Any) -> dict[str, Any] | None:
        """This reward's own refusals: tasks it does not score, paths when none are allowed."""
        if not isinstance(item, Mapping):
            return None
        task = item.get("task")
        if self.tasks is not None and task is not None and _task_id(task) not in self.tasks:
            # judged on the raw value, as the planner reads it: no field too long to show slips past
            allowed = ", ".join(sorted(self.tasks))
            shown = repr(clean_field(task)) if clean_field(task) is not None else "this task"
            return refusal_row(line, item, ErrorCode.UNKNOWN_TASK, f"{shown} is not scored by this reward (tasks: {allowed})")
        if not self.allow_paths and isinstance(item.get("parts"), list):
            if any(isinstance(p, Mapping) and p.get("path") is not None for p in item["parts"]):
                message = "media paths are not accepted here (no data root is set); send media inline as base64 'data'"
                return refusal_row(line, item, ErrorCode.PATH_OUTSIDE_ROOT, message)
        return None
