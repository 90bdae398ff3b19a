"""Which tasks can run here: models, judges and reference sets, each with the fix when missing.

Nothing is loaded and nothing touches the network: backends report from their packages and
files (``availability``), judges and reference sets from the configuration.  ``mmverify doctor``
prints this per task; ``score --dry-run`` prints it for the tasks a manifest uses.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Iterable, Mapping

from ..tasks.catalog import CATALOG, TASK_REGISTRY, judge_role

if TYPE_CHECKING:
    from pathlib import Path

    from .plan import Planner
    from .score import ScoreConfig

# Task needs (the catalog's words) -> the model hub's capabilities.
_JUDGE_FIX = "configure a judge: --vlm-base-url URL --vlm-model NAME (or MMVERIFY_VLM_BASE_URL / MMVERIFY_VLM_MODEL)"


@dataclass(frozen=True)
class Requirement:
    what: str  # "audio_text (clap-hf)", "judge (default)", "reference set esc50"
    ok: bool
    detail: str  # where it loads from, or why not and how to get it


@dataclass
class TaskReadiness:
    task: str
    requirements: list[Requirement] = field(default_factory=list)

    @property
    def ready(self) -> bool:
        return all(r.ok for r in self.requirements)

    def fixes(self) -> list[str]:
        return [f"{r.what}: {r.detail}" for r in self.requirements if not r.ok]


def capability_requirement(capability: str) -> Requirement:
    """Whether the configured backend of ``capability`` is usable, naming usable alternatives if not."""
    from ..models.hub import get_hub, usable_alternatives

    hub = get_hub()
    try:  # the backend as scoring builds it: its checkpoint, spec options, device and precision
        backend = hub.instance(capability)
    except Exception as exc:  # a configuration no backend can be built from
        return Requirement(capability, False, str(exc))
    name = backend.name
    state = backend.availability()
    if state.ok:
        return Requirement(f"{capability} ({name})", True, state.location)
    detail = state.reason
    others = usable_alternatives(capability, exclude=name)
    if others:
        detail += "; usable here instead: " + ", ".join(f"--model {capability}={other}" for other in others)
    return Requirement(f"{capability} ({name})", False, detail)


def judge_requirement(role: str) -> Requirement:
    """A judge is ready when configured and usable as configured: a local checkpoint that exists
    (or is in the hub cache) with its packages, or an endpoint with an http(s) URL.  An unset key
    variable is only noted: servers on this machine often take none."""
    import os

    from ..models.base import ModelUnavailable
    from ..models.hub import get_hub
    from ..models.judge_config import LOCAL_PREFIX, config_from_env
    from ..models.judge_endpoint import check_base_url, is_loopback, without_credentials
    from ..models.judge_local import TransformersVLMJudge

    what = f"judge ({role})"
    config = config_from_env(role)
    if config is None:
        return Requirement(what, False, _JUDGE_FIX)
    if config.is_local:
        state = TransformersVLMJudge(config.model[len(LOCAL_PREFIX) :]).availability()
        return Requirement(what, state.ok, f"{config.model} in-process ({state.location})" if state.ok else state.reason)
    assert config.base_url is not None
    try:
        check_base_url(config.base_url, "the judge's base URL")
        get_hub().judge(role)  # as scoring builds it: its limits and URL checked
    except (ValueError, ModelUnavailable) as exc:
        return Requirement(what, False, exc.message if isinstance(exc, ModelUnavailable) else str(exc))
    notes = []
    if config.offline and not is_loopback(config.base_url):
        notes.append("offline: cached replies only")
    if not os.environ.get(config.api_key_env):
        notes.append(f"no key: {config.api_key_env} is not set")
    return Requirement(what, True, f"{config.model} at {without_credentials(config.base_url)}" + (f" ({'; '.join(notes)})" if notes else ""))


def reference_requirement(name: str) -> Requirement:
    from ..core.errors import ScoringError
    from ..references.sets import configured_root

    try:
        root = configured_root(name)
    except ScoringError as exc:
        return Requirement(f"reference set {name}", False, exc.message)
    if not root.is_dir():
        return Requirement(f"reference set {name}", False, f"{root} is not a folder")
    return Requirement(f"reference set {name}", True, str(root))


def distinct_judges_requirement(roles: tuple[str, ...], fix: str) -> Requirement | None:
    """Whether the judges of ``roles`` are different models, tested as the task that compares
    their readings tests them (:func:`~mmverify.models.judge_config.shared_model` on the hub's
    judges); None while one of them is not configured or not usable (its own requirement says so)."""
    from itertools import combinations

    from ..models.hub import get_hub
    from ..models.judge_config import config_from_env, shared_model

    configs = [config_from_env(role) for role in roles]
    if any(config is None for config in configs):
        return None
    what = f"distinct judges ({', '.join(roles)})"
    try:
        judges = [get_hub().judge(role) for role in roles]
        shared = next(filter(None, (shared_model(first, second) for first, second in combinations(judges, 2))), None)
    except Exception:  # noqa: BLE001  (a judge that cannot be built or hashed: its own requirement says why)
        return None
    if shared is not None:
        return Requirement(what, False, fix.format(model=shared))
    return Requirement(what, True, ", ".join(config.model for config in configs if config is not None))


def task_readiness(task_id: str) -> TaskReadiness:
    """What ``task_id`` needs here: its models, the judge of each role it asks (a role without a
    judge of its own falls back to the default one, as scoring does), whether judges it compares
    are distinct, and its reference set."""
    info = CATALOG[task_id]
    readiness = TaskReadiness(task_id)
    task = TASK_REGISTRY.get(task_id) if info.implemented else None
    readiness.requirements.extend(capability_requirement(need) for need in info.needs if judge_role(need) is None)
    asked = [role for role in map(judge_role, info.needs) if role is not None]
    if asked:
        readiness.requirements.extend(judge_requirement(role) for role in getattr(task, "roles", None) or asked)
    distinct = getattr(task, "distinct_roles", ())
    if distinct:
        requirement = distinct_judges_requirement(distinct, task.distinct_roles_fix)  # type: ignore[union-attr]
        if requirement is not None:
            readiness.requirements.append(requirement)
    reference_set = getattr(task, "reference_set", None)
    if reference_set:
        readiness.requirements.append(reference_requirement(reference_set))
    return readiness


def batching_notes(planned: Mapping[str, int], in_flight: int) -> list[str]:
    """Backends of the ``planned`` tasks (task -> items) whose batch shape is larger than the items
    that can be scored together: a batch holds the requests of the items in flight, so it runs
    partly padding (a lone item pays for the whole batch) unless items ask for several inputs."""
    from ..models.hub import get_hub

    users: dict[str, int] = {}  # capability -> planned items that use it
    for task, count in planned.items():
        for capability in CATALOG[task].capabilities:
            users[capability] = users.get(capability, 0) + count
    hub, notes = get_hub(), []
    for capability, count in users.items():
        try:
            backend = hub.instance(capability)
        except Exception:  # reported among the requirements
            continue
        rows, together = backend.rows_per_forward, min(in_flight, count)
        if rows is None or rows <= together:
            continue
        if count > in_flight:
            # packed, twice the batch lets decoding overlap the model; by content a batch starts once
            # twice the batch waits (its rows are rarely all taken sooner), so four times
            times = 4 if backend.rows_by_content else 2
            advice = f"raise --batch-items to {times * rows} ({times}x the batch lets decoding overlap the model) or lower its batch_size"
        else:
            advice = f"only {count} planned items use it: lower its batch_size"
        notes.append(f"{capability} ({backend.name}) runs batches of {rows} rows, but at most {together} items are scored together: {advice}")
    return notes


def readiness(tasks: Iterable[str] | None = None) -> list[TaskReadiness]:
    """Readiness of ``tasks`` (default: every catalog task), capability checks shared."""
    return [task_readiness(task) for task in (tasks if tasks is not None else CATALOG)]


@dataclass
class DryRun:
    """What ``score`` would do with a manifest, without scoring anything."""

    planned: dict[str, int] = field(default_factory=dict)  # task -> entries that would be scored
    errors: dict[str, dict[str, list[str]]] = field(default_factory=dict)  # task -> code -> messages
    filtered: int = 0
    tasks: list[TaskReadiness] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # advice that blocks nothing (see batching_notes)


def dry_run(config: "ScoreConfig") -> DryRun:
    """Plan every manifest line (parsing, instances, media paths, keys) and check what the planned
    tasks need; no model, judge or media decoder is called."""
    from ..data.manifest import iter_manifest_lines
    from .context import installed
    from .score import build_planner, with_worker_device

    config = with_worker_device(config)
    with installed(config.context):  # the keys and the readiness checks read it
        return _dry_run(config, build_planner(config), iter_manifest_lines)


def _dry_run(config: "ScoreConfig", planner: "Planner", lines: Callable[[Path], Iterable[tuple[int, str]]]) -> DryRun:
    report = DryRun()
    for line, text in lines(config.manifest):
        for entry in planner.plan_all(line, text):
            if isinstance(entry, dict):
                messages = report.errors.setdefault(str(entry["task"]), {}).setdefault(entry["error"]["code"], [])
                messages.append(f"line {line}: {entry['error']['message']}")
                continue
            if config.limit is not None and report.planned.get(entry.task, 0) >= config.limit:
                report.filtered += 1
                continue
            report.planned[entry.task] = report.planned.get(entry.task, 0) + 1
    report.filtered += planner.stats.skipped_filtered
    report.tasks = readiness(sorted(report.planned))
    report.notes = batching_notes(report.planned, config.in_flight)
    return report
