"""Planning: manifest line -> work item (picklable) or an immediate error row, plus its key.

Everything that can go wrong before scoring (bad JSON, unknown task, unknown instance, missing file,
path outside the data root) is decided here, in manifest order, so the worker only scores.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping

from ..core.errors import ErrorCode, ScoringError
from ..core.hashing import FileDigests, digest_of, sha256_bytes
from ..core.media import DEFAULT_LIMITS, MediaLimits
from ..core.registry import UnknownIdError
from ..core.types import Generation, Instance
from ..data.instructions import InstructionSet
from ..data.manifest import ManifestError, MediaPaths, is_regular_file, parse_line, path_exists
from ..tasks.base import DEFAULT_PROFILE, check_profile
from ..tasks.catalog import CATALOG, SOURCE_FILES, TASK_REGISTRY, bare_task_id, judge_role, task_info, tasks_for_source
from ..tasks.response import ResolvedPart
from .model_keys import ModelKeys
from .results import RowIdentity, error_row
from .thresholds import Threshold

KEY_SCHEME = "mmverify-key/1"
_INSTANCE_MEDIA_FIELDS = {"image_list": "image", "ref_image_list": "image", "audio_list": "audio"}


def unresolved_key(code: str, line: int, fingerprint: Any) -> str:
    """The key of a row for an entry refused before it named a task and instance (content-based,
    so a resumed run recognises it)."""
    return digest_of(KEY_SCHEME, "unresolved", code, line, fingerprint)


@dataclass(frozen=True)
class WorkItem:
    """Everything a worker needs to score one generation (no open files, no models)."""

    task: str
    instance: Instance
    parts: tuple[ResolvedPart, ...]
    instance_id: str
    sample: int
    model: str | None
    line: int
    key: str
    verifier: str
    threshold: Threshold | None = None
    limits: MediaLimits = DEFAULT_LIMITS
    profile: str = DEFAULT_PROFILE

    @property
    def identity(self) -> RowIdentity:
        return RowIdentity(self.task, self.instance_id, self.sample, self.model, self.key, self.line, self.verifier)


@dataclass
class PlanStats:
    lines: int = 0
    skipped_done: int = 0
    skipped_filtered: int = 0
    immediate_errors: int = 0
    # entries naming the task, instance, sample and model of an earlier line, with other content:
    # compare and calibrate pair rows by those fields and cannot tell such rows apart
    shared_names: int = 0
    first_shared: str | None = None  # "line 7 (as line 3)"

    def note_name(self, entry: Any, line: int, seen: dict[tuple, tuple[int, str]]) -> None:
        """Count ``entry`` when an earlier line of another key named the same generation.  Only
        entries to be scored count: a refused line's key names the line, not its content."""
        if isinstance(entry, dict):
            return
        earlier = seen.setdefault((entry.task, entry.instance_id, entry.sample, entry.model), (line, entry.key))
        if earlier[1] != entry.key:
            self.shared_names += 1
            self.first_shared = self.first_shared or f"line {line} (as line {earlier[0]})"


@dataclass
class Planner:
    manifest_dir: Path
    instructions: InstructionSet | None = None
    data_root: Path | None = None
    tasks: frozenset[str] | None = None  # only these task ids, or the tasks of these instruction files (None: all)
    thresholds: Mapping[str, Threshold] = field(default_factory=dict)
    limits: MediaLimits = DEFAULT_LIMITS
    profile: str = DEFAULT_PROFILE
    allow_paths: bool = True  # False: inline media only (a reward server without a data root)

    def __post_init__(self) -> None:
        check_profile(self.profile)
        self._digests = FileDigests(max_bytes=self.limits.max_bytes)
        self._task_objects: dict[str, Any] = {}
        self._model_keys = ModelKeys()
        self.stats = PlanStats()
        # the tasks --tasks selects: those named, and those an instruction file named there feeds
        self._selected = None if self.tasks is None else self.tasks | {i.id for i in CATALOG.values() if self.tasks & set(i.source_files)}

    # -- helpers ---------------------------------------------------------------------------------
    @property
    def paths(self) -> MediaPaths:
        return MediaPaths(self.manifest_dir, self.data_root, self.allow_paths)

    def _task(self, task_id: str) -> Any:
        if task_id not in self._task_objects:
            self._task_objects[task_id] = TASK_REGISTRY.get(task_id).build(self.profile)
        return self._task_objects[task_id]

    def _instance(self, generation: Generation, source: str) -> Instance:
        if generation.instance is not None:
            if self.instructions:  # the instruction set's own media, in the folder the user named
                return Instance(id=generation.instance_id, data=generation.instance, source=source, media_dir=self.instructions.root)
            paths = self.paths  # media beside the generations: the policy of the parts' paths
            return Instance(id=generation.instance_id, data=generation.instance, source=source, media_dir=paths.base_dir, resolve=paths.resolve)
        if self.instructions is None:
            raise ScoringError(
                ErrorCode.UNKNOWN_INSTANCE,
                f"{generation.instance_id}: no inline 'instance' and no --instructions folder given",
            )
        instance = self.instructions.instance(generation.instance_id)
        info = task_info(generation.task)
        if instance.source not in info.source_files:
            raise ScoringError(
                ErrorCode.UNKNOWN_INSTANCE,
                f"{generation.instance_id} is not an instance of {generation.task} "
                f"(its instructions are in {', '.join(f + '.jsonl' for f in info.source_files)})",
            )
        if not info.accepts(instance.data):
            raise ScoringError(
                ErrorCode.INVALID_INSTANCE, f"{generation.instance_id} has no '{info.select}' field for {info.id}"
            )
        return instance

    def _resolve_parts(self, generation: Generation) -> tuple[tuple[ResolvedPart, ...], list[Any]]:
        resolved: list[ResolvedPart] = []
        fingerprint: list[Any] = []
        for part in generation.parts:
            if part.type == "text":
                resolved.append(ResolvedPart("text", text=part.text or ""))
                fingerprint.append(["text", part.text])
            elif part.data is not None:
                resolved.append(ResolvedPart(part.type, media=part.data, label="inline"))
                fingerprint.append([part.type, sha256_bytes(part.data)])
            else:
                assert part.path is not None
                path = self.paths.resolve(part.path)
                if not is_regular_file(path):
                    what = "is not a regular file" if path_exists(path) else "not found"
                    raise ScoringError(ErrorCode.MISSING_MEDIA, f"{part.type} file {what}: {part.path}")
                try:
                    digest = self._digests(path)
                except OSError as exc:
                    message = f"{part.type} file cannot be read: {part.path} ({exc.strerror})"
                    raise ScoringError(ErrorCode.MISSING_MEDIA, message) from None
                resolved.append(ResolvedPart(part.type, media=path, label=part.path))
                fingerprint.append([part.type, digest])
        return tuple(resolved), fingerprint

    def _instance_media_fingerprint(self, instance: Instance) -> list[Any]:
        """Digests of the instance's own media (edit sources, reference views) that exist."""
        prints: list[Any] = []
        for name, kind in sorted(_INSTANCE_MEDIA_FIELDS.items()):
            indices = instance.data.get(name)
            if not isinstance(indices, list):
                continue
            for index in indices:
                prints.append([name, index, self._readable_digest(instance, kind, index)])
        return prints

    def _readable_digest(self, instance: Instance, kind: str, index: Any) -> str | None:
        """The digest of an instance media file, or None when it is absent, cannot be read or is
        refused by the path policy (scoring reports that when the task reads it)."""
        try:
            path = instance.media_path(kind, index) if isinstance(index, int) else None
            return self._digests(path) if path is not None and is_regular_file(path) else None
        except (OSError, ScoringError):
            return None

    # -- planning --------------------------------------------------------------------------------
    def plan(self, line: int, text: str | None) -> WorkItem | dict[str, Any] | None:
        """One work item, an immediate error row, or None when ``--tasks`` filters the line out.
        A line naming an instruction file whose row feeds several tasks (``a_music_attribute`` rows
        with both ``instrument`` and ``tempo``) is an error row here: name the task, or use
        :meth:`plan_all`.  Never raises."""
        entries = self.plan_all(line, text)
        if len(entries) <= 1:
            return entries[0] if entries else None
        tasks = ", ".join(e["task"] if isinstance(e, dict) else e.task for e in entries)
        message = f"this row feeds {len(entries)} tasks ({tasks}); name one of them as the line's task"
        return self._error_row(line, text, "?", "?", ErrorCode.UNKNOWN_TASK, message)

    def plan_all(self, line: int, text: str | None) -> list[WorkItem | dict[str, Any]]:
        """The entries of one manifest line: usually one; one per task when the line names an
        instruction file (``a_music_attribute``, ``i_ocr_chinese``) whose row feeds several; none
        when ``--tasks`` filters it out.  Never raises: an unexpected failure while planning becomes
        the line's ``internal_error`` row."""
        try:
            return self._plan_all(line, text)
        except Exception as exc:  # a planning bug must cost one row, not the run
            message = f"planning failed: {type(exc).__name__}: {exc}"
            return [self._error_row(line, text, "?", "?", ErrorCode.INTERNAL, message)]

    def _plan_all(self, line: int, text: str | None) -> list[WorkItem | dict[str, Any]]:
        self.stats.lines += 1
        if text is None:
            return [self._error_row(line, None, "?", "?", ErrorCode.MALFORMED_LINE, "line exceeds the size limit")]
        try:
            generation = parse_line(text, line)
        except ManifestError as exc:
            if exc.generation is None:
                task, instance_id = exc.names or ("?", "?")
                return [self._error_row(line, text, task, instance_id, exc.code, str(exc))]
            # the rest of the line is valid: one row per task it would feed, as if it were scored
            refused, _ = self._routed(exc.generation, refused=True)
            several = len(refused) > 1  # then each task's row has its own key
            return [self._error_row(line, text, g.task, g.instance_id, exc.code, str(exc), g, several) for g in refused]
        try:
            routed, source = self._routed(generation)
        except UnknownIdError as exc:
            return [self._error_row(line, text, generation.task, generation.instance_id, ErrorCode.UNKNOWN_TASK, str(exc), generation)]
        except ScoringError as exc:
            return [self._error_row(line, text, generation.task, generation.instance_id, exc.code, exc.message, generation)]
        return [self._plan_generation(line, text, g, source) for g in routed]

    def _routed(self, generation: Generation, refused: bool = False) -> tuple[list[Generation], str | None]:
        """:meth:`_route` under ``--tasks`` (an empty list: filtered out, counted).  Routing errors
        raise, except for a ``refused`` line: its row then names the task as the line wrote it."""
        named = bare_task_id(generation.task)
        if self.tasks is not None and named not in self.tasks and named not in CATALOG and named not in SOURCE_FILES:
            routed: list[Generation] = []
        else:
            try:
                routed, source = self._route(generation)
            except (UnknownIdError, ScoringError):
                if not refused:
                    raise
                routed, source = [generation], None
            if self.tasks is not None and named not in self.tasks:
                routed = [g for g in routed if bare_task_id(g.task) in (self._selected or ())]
            if routed:
                return routed, source
        self.stats.skipped_filtered += 1
        return [], None

    def _route(self, generation: Generation) -> tuple[list[Generation], str | None]:
        """The task(s) a line is scored by.  A task id stands for itself; an instruction file's name
        (as in MMMG's own layout) routes by the row's fields, as ``import-mmmg`` does."""
        if generation.task in CATALOG or generation.task.startswith("task:"):
            return [generation], None
        if generation.task not in SOURCE_FILES:
            task_info(generation.task)  # raises the did-you-mean error
        source = generation.task
        if generation.instance is not None:
            data: Mapping[str, Any] = generation.instance
        elif self.instructions is None:
            raise ScoringError(ErrorCode.UNKNOWN_INSTANCE, f"{generation.instance_id}: no inline 'instance' and no --instructions folder given")
        else:
            data = self.instructions.instance(generation.instance_id).data
        infos = tasks_for_source(source, data)
        if not infos:
            wanted = sorted({i.select for i in CATALOG.values() if source in i.source_files and i.select})
            raise ScoringError(
                ErrorCode.INVALID_INSTANCE,
                f"{generation.instance_id}: a {source} row needs one of the fields {', '.join(wanted)} to name its task",
            )
        return [replace(generation, task=info.id) for info in infos], source

    def _plan_generation(self, line: int, text: str, generation: Generation, source: str | None) -> WorkItem | dict[str, Any]:
        try:
            info = task_info(generation.task)
        except UnknownIdError as exc:
            return self._error_row(line, text, generation.task, generation.instance_id, ErrorCode.UNKNOWN_TASK, str(exc), generation)
        if not info.implemented:
            message = f"{info.id} ({info.name}) is not implemented yet; `mmverify tasks` shows what is"
            return self._error_row(line, text, info.id, generation.instance_id, ErrorCode.NOT_IMPLEMENTED, message, generation)
        task = self._task(info.id)
        threshold = self.thresholds.get(info.id)
        base = [KEY_SCHEME, task.verifier_id, dict(task.params()), threshold.as_dict() if threshold else None]
        if any(judge_role(need) is None for need in info.needs):  # judges are keyed by the tasks themselves
            base.append(self._model_keys.of(info.needs, task))
        local_judges = self._model_keys.local_judges(task)  # an in-process judge: by its weights too
        if local_judges:
            base.append(local_judges)
        try:
            instance = self._instance(generation, source or info.source_files[0])
            parts, fingerprint = self._resolve_parts(generation)
        except ScoringError as exc:
            # the key still identifies the generation, so fixing the input yields a new key and a rescore
            key = digest_of(*base, "unresolved", exc.code, text)
            return self._row(generation, key, task.verifier_id, exc.code, exc.message)
        key = digest_of(
            *base,
            generation.instance_id,
            dict(instance.data),
            self._instance_media_fingerprint(instance),
            generation.sample,
            generation.model,
            fingerprint,
        )
        return WorkItem(
            task=info.id,
            instance=instance,
            parts=parts,
            instance_id=generation.instance_id,
            sample=generation.sample,
            model=generation.model,
            line=line,
            key=key,
            verifier=task.verifier_id,
            threshold=threshold,
            limits=self.limits,
            profile=self.profile,
        )

    def _row(self, generation: Generation, key: str, verifier: str | None, code: str, message: str) -> dict[str, Any]:
        self.stats.immediate_errors += 1
        identity = RowIdentity(
            generation.task, generation.instance_id, generation.sample, generation.model, key, generation.line, verifier
        )
        return error_row(identity, code, message)

    def _error_row(
        self,
        line: int,
        text: str | None,
        task: str,
        instance_id: str,
        code: str,
        message: str,
        generation: Generation | None = None,
        keyed_by_task: bool = False,
    ) -> dict[str, Any]:
        key = unresolved_key(code, line, [text, task] if keyed_by_task else text)
        if generation is not None:
            return self._row(generation, key, None, code, message)
        self.stats.immediate_errors += 1
        return error_row(RowIdentity(task, instance_id, 0, None, key, line, None), code, message)
