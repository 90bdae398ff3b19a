"""``mmverify score``: plan, skip what is done, execute, append rows in order, summarise."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator, Mapping

from .. import __version__
from ..core.media import DEFAULT_LIMITS, MediaLimits
from ..data.instructions import InstructionSet
from ..models.cache import cache_problems
from ..models.judge_usage import usage_totals
from ..data.manifest import is_stream, iter_manifest_lines, manifest_base_dir
from .context import ScoringContext, current, install_context, installed
from .execute import LocalExecutor, Planned, check_decode_processes, check_time_limit
from .plan import Planner, PlanStats
from .outdir import LATEST_FILE, OutputLock, check_output_folder, claim_for_manifest, current_rows, manifest_fingerprint
from .results import ResultsFile
from ..tasks.base import DEFAULT_PROFILE, check_profile
from .summary import AGGREGATIONS, judge_usage_section, summarize, write_summary
from .thresholds import Threshold

SYNC_INTERVAL_S = 1.0


@dataclass
class ScoreConfig:
    manifest: Path
    out: Path
    instructions: Path | None = None
    tasks: frozenset[str] | None = None
    workers: int = 1
    in_flight: int = 32  # model items scored together in a process or worker, their calls batched (1: one by one)
    decode_processes: int = 0  # processes (of each worker process) decoding the media of items scored together
    model_process: bool = False  # with worker processes: one process computes the servable models' batches
    timeout: float | None = 300.0
    warmup_timeout: float | None = 600.0  # worker start-up and each task's first use, apart from timeout
    thresholds: Mapping[str, Threshold] = field(default_factory=dict)
    data_root: Path | None = None
    retry_errors: bool = False
    limits: MediaLimits = DEFAULT_LIMITS
    bootstrap_seed: int = 0
    executor: str = "local"  # "local" (in-process for 1 worker, processes for more) or "ray"
    ray_address: str | None = None
    gpus_per_worker: float = 0.0
    profile: str = DEFAULT_PROFILE
    limit: int | None = None  # at most this many entries per task (the first ones in manifest order)
    append: bool = False  # add this manifest's rows to a folder holding another manifest's
    overwrite: bool = False  # discard whatever the folder holds first
    aggregate: str = "apart"  # "apart": error rows reported beside the means; "as_zero": counted as 0 (official scripts)
    context: ScoringContext | None = None  # models, device, judges...: installed for the run; None: the one in force

    def __post_init__(self) -> None:
        check_profile(self.profile)
        if self.aggregate not in AGGREGATIONS:
            raise ValueError(f"aggregate must be one of {', '.join(AGGREGATIONS)}")
        if self.workers < 1:
            raise ValueError("workers must be >= 1")
        if self.in_flight < 1:
            raise ValueError("in_flight must be >= 1")
        check_decode_processes(self.decode_processes, self.in_flight)
        if self.decode_processes and self.executor != "local":
            raise ValueError("decode processes serve this process or its worker processes, not Ray actors (--executor local)")
        if self.model_process and (self.workers < 2 or self.executor != "local"):
            raise ValueError("a model process serves worker processes (--workers N, N > 1, without Ray)")
        if self.limit is not None and self.limit < 1:
            raise ValueError("limit must be >= 1")
        if self.executor not in ("local", "ray"):
            raise ValueError("executor must be 'local' or 'ray'")
        if self.gpus_per_worker < 0:
            raise ValueError("gpus_per_worker must be >= 0")
        check_time_limit(self.timeout, "timeout")
        check_time_limit(self.warmup_timeout, "warmup_timeout")

    def describe(self) -> dict[str, Any]:
        return {
            "manifest": shown_path(self.manifest),
            "instructions": shown_path(self.instructions) if self.instructions else None,
            "tasks": sorted(self.tasks) if self.tasks else None,
            "workers": self.workers,
            "in_flight": self.in_flight,
            "decode_processes": self.decode_processes,
            "model_process": self.model_process,
            "executor": self.executor,
            "timeout_s": self.timeout,
            "warmup_timeout_s": self.warmup_timeout,
            "data_root": shown_path(self.data_root) if self.data_root else None,
            "thresholds": {task: t.as_dict() for task, t in sorted(self.thresholds.items())},
            "profile": self.profile,
            "aggregate": self.aggregate,
            "append": self.append,
            "limit": self.limit,
        }


@dataclass
class ScoreOutcome:
    written: int
    plan: PlanStats
    results_path: Path
    summary_path: Path
    summary: dict[str, Any]
    latest_path: Path
    errors: int  # error rows among the current rows (one per manifest line)


def shown_path(path: Path) -> str:
    """``path`` as text to record: bytes of its name that are not UTF-8 written as ``\\xff``."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def count_lines(path: Path) -> int | None:
    """Lines to score, or None for a stream (a pipe can be read only once: by the scorer)."""
    if is_stream(path):
        return None
    return sum(1 for _ in iter_manifest_lines(path))


def run_score(config: ScoreConfig, progress: Any = None) -> ScoreOutcome:
    """Score a manifest into ``config.out``; resumes from rows already there.  The folder is locked
    for the run; another manifest's folder is refused unless ``append`` or ``overwrite``."""
    check_output_folder(config.out)
    config = with_worker_device(config)
    # planning (result keys) and in-process scoring read the context too
    with installed(config.context), OutputLock(config.out):
        if config.manifest.is_file() or is_stream(config.manifest):  # a stream cannot be read twice: no fingerprint
            fingerprint = None if is_stream(config.manifest) else manifest_fingerprint(config.manifest)
            claim_for_manifest(config.out, fingerprint, append=config.append, overwrite=config.overwrite)
        return _run_locked(config, progress)


def with_worker_device(config: ScoreConfig) -> ScoreConfig:
    """``config`` with the device its Ray actors compute on named in its context, where none is:
    an actor sees a GPU only when it asks for one (``--gpus-per-worker``), and this process (which
    works out the result keys, device type included) may see others, or none."""
    context = config.context or current()
    if config.executor != "ray" or context.settings.get("MMVERIFY_DEVICE"):
        return config
    return replace(config, context=replace(context, device="cuda" if config.gpus_per_worker > 0 else "cpu"))


def build_planner(config: ScoreConfig) -> Planner:
    """The planner for a score configuration (shared by scoring and ``--dry-run``)."""
    return Planner(
        manifest_dir=manifest_base_dir(config.manifest),
        instructions=InstructionSet(config.instructions) if config.instructions else None,
        data_root=config.data_root,
        tasks=config.tasks,
        thresholds=config.thresholds,
        limits=config.limits,
        profile=config.profile,
    )


def _run_locked(config: ScoreConfig, progress: Any) -> ScoreOutcome:
    started = datetime.now(timezone.utc)
    problems_before = len(cache_problems())
    usage_before = usage_totals()  # judge usage so far in this process (and forwarded by workers)
    results = ResultsFile(config.out / "results.jsonl")
    existing = results.load()
    done = {row["key"] for row in existing if not (config.retry_errors and row.get("status") == "error")}
    planner = build_planner(config)

    line_keys: list[tuple[int, str]] = []  # (manifest line, key) of every entry this run scores
    per_task: dict[str, int] = {}  # entries planned per task, for --limit
    names: dict[tuple, tuple[int, str]] = {}  # (task, instance, sample, model) -> first (line, key)

    def planned() -> Iterator[Planned]:
        for line, text in iter_manifest_lines(config.manifest):
            for entry in planner.plan_all(line, text):  # a line naming an instruction file may feed two tasks
                task = entry["task"] if isinstance(entry, dict) else entry.task
                if config.limit is not None and per_task.get(task, 0) >= config.limit:
                    planner.stats.skipped_filtered += 1
                    continue
                per_task[task] = per_task.get(task, 0) + 1
                planner.stats.note_name(entry, line, names)
                key = entry["key"] if isinstance(entry, dict) else entry.key
                line_keys.append((line, key))
                if key in done:
                    planner.stats.skipped_done += 1
                    if progress is not None:
                        progress(1)
                    continue
                done.add(key)  # a duplicate line later in the manifest is skipped, not rescored
                yield entry

    executor = make_executor(config)
    written = 0
    last_sync = time.monotonic()
    with results:
        for row in executor.run(planned()):
            now = time.monotonic()
            sync = now - last_sync >= SYNC_INTERVAL_S
            written += results.append([row], sync=sync)
            if sync:
                last_sync = now
            if progress is not None:
                progress(1)
        results.sync()

    rows = results.load()
    if config.retry_errors:
        rows = _drop_superseded_errors(rows)
        results.rewrite(rows)
    current = current_rows(rows, line_keys)
    latest = ResultsFile(config.out / LATEST_FILE)
    latest.rewrite(current)
    summary = summarize(
        current,
        config=config.describe(),
        started=started,
        finished=datetime.now(timezone.utc),
        seed=config.bootstrap_seed,
        aggregate_errors=config.aggregate,
    )
    summary["run"] = {"package_version": __version__, "written": written, "current_rows": len(current), **planner.stats.__dict__}
    summary["cache_problems"] = cache_problems()[problems_before:]  # broken caches met during this run
    summary["judge_usage"] = judge_usage_section(usage_before)  # requests, cache hits, tokens of this run
    summary_path = config.out / "summary.json"
    write_summary(summary, summary_path)
    errors = sum(row.get("status") != "scored" for row in current)
    return ScoreOutcome(written, planner.stats, results.path, summary_path, summary, latest.path, errors)


def make_executor(config: ScoreConfig) -> Any:
    """The executor of ``config``; worker processes and Ray actors are handed the scoring context
    (``config.context``, else the one in force here) and install it before their first item."""
    if config.executor == "ray":
        from .ray_executor import RayExecutor

        return RayExecutor(
            config.workers, config.timeout, config.ray_address, config.gpus_per_worker,
            warmup_timeout=config.warmup_timeout, in_flight=config.in_flight,
            initializer=install_context, initargs=(config.context or current(),),
        )  # fmt: skip
    if config.workers == 1:
        return LocalExecutor(config.timeout, config.warmup_timeout, config.in_flight, config.decode_processes)
    from .process_executor import ProcessExecutor

    return ProcessExecutor(
        workers=config.workers, timeout=config.timeout, warmup_timeout=config.warmup_timeout, in_flight=config.in_flight,
        initializer=install_context, initargs=(config.context or current(),),
        model_context=(config.context or current()) if config.model_process else None, decode_processes=config.decode_processes,
    )  # fmt: skip


def _drop_superseded_errors(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Keep one row per key: an error row is dropped when a later row has the same key."""
    last_index = {row["key"]: i for i, row in enumerate(rows)}
    return [row for i, row in enumerate(rows) if row.get("status") != "error" or last_index[row["key"]] == i]
