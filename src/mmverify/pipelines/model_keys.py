"""What a model task's result key says of the models and reference files behind its rows.

For each capability a task's catalog row declares, the key names the backend serving it in the
scoring context in force by its fingerprint -- checkpoint by content, batch rows, device type,
feature front end, precision -- and by its spec options (decode length, ...).  A task that compares
with a reference set adds the set's folder and the name, size and modification time of every file
its layout reads.  So a checkpoint replaced in place, a reference file added or rewritten, or
another backend or option gives new keys and a rescore, while settings a task does not use (another
capability's checkpoint, other tasks' reference sets, a precision its backend has no option for)
leave its keys alone.

Nothing is loaded or downloaded.  Checkpoints are hashed where they lie (a large file once per
change, see :func:`mmverify.models.base.checkpoint_digest`), once per backend object and process.
A backend or reference set that cannot be used here is named by its source: its rows are
``model_unavailable`` errors, and its key changes once it is usable, so they are rescored then.
Judges are not covered here: judged tasks key their judge configuration themselves.
"""

from __future__ import annotations

from typing import Any, Iterable

from ..core.errors import ScoringError
from ..core.hashing import digest_of
from ..core.settings import scoring_settings
from ..tasks.catalog import judge_role

MODEL_KEY_SCHEME = "mmverify-models/2"


def backend_identity(capability: str) -> dict[str, Any]:
    """What decides ``capability``'s outputs in the scoring context in force (see the module).  Where
    that cannot be known here, what was asked for: the backend and its source, else the model specs
    (its rows are errors that say why)."""
    from ..models.hub import get_hub

    identity: dict[str, Any] = {"capability": capability}
    try:
        hub = get_hub()
    except Exception as exc:  # specs that do not parse
        return {**identity, "unusable": type(exc).__name__, "asked": scoring_settings().get("MMVERIFY_MODELS", "")}
    identity["options"] = dict(sorted(hub.options.get(capability, {}).items()))
    try:
        backend = hub.instance(capability)
    except Exception as exc:  # options its constructor refuses
        return {**identity, "unusable": type(exc).__name__, "asked": list(hub.choice(capability))}
    try:
        identity["backend"] = backend.fingerprint
    except Exception as exc:  # no checkpoint, packages missing, ...
        identity["unusable"] = type(exc).__name__
        identity["backend"] = f"{getattr(backend, 'name', type(backend).__name__)}@{getattr(backend, 'source', None)}"
    return identity


def reference_identity(name: str, layout: str) -> dict[str, Any]:
    """Reference set ``name`` as ``layout`` reads it from its configured folder: each file's name,
    size and modification time (no file is read whole; the index checks contents itself)."""
    from ..references.layouts import scan
    from ..references.sets import configured_root

    identity: dict[str, Any] = {"reference_set": name, "layout": layout}
    try:
        root = configured_root(name)
        identity["root"] = str(root)
        files = []
        for ref in scan(layout, root):
            stat = ref.path.stat()
            files.append([ref.name, ref.label, stat.st_size, stat.st_mtime_ns])
    except (ScoringError, OSError, ValueError) as exc:
        identity["unusable"] = type(exc).__name__
        return identity
    identity["files"] = digest_of(sorted(files))  # one digest: a key is worked out per item
    return identity


class ModelKeys:
    """The model part of result keys, worked out once per capability (and reference set) and
    scoring settings: a planner's keys stay cheap while each item names what scored it."""

    def __init__(self) -> None:
        self._known: dict[tuple, Any] = {}

    def _memo(self, what: tuple, compute: Any) -> Any:
        key = (what, tuple(sorted(scoring_settings().items())))
        if key not in self._known:
            value = compute()
            if "unusable" in value:  # usable later in this process (fetched, configured): look again then
                return value
            self._known[key] = value
        return self._known[key]

    def of(self, needs: Iterable[str], task: Any) -> list[Any]:
        """The key part for a task with catalog ``needs`` (judges excluded); ``task``'s
        ``reference_set`` and ``layout``, where it has them, add that reference set."""
        part: list[Any] = [MODEL_KEY_SCHEME]
        for capability in sorted(set(needs)):
            if judge_role(capability) is None:
                part.append(self._memo(("backend", capability), lambda c=capability: backend_identity(c)))
        name = getattr(task, "reference_set", None)
        if name:
            layout = getattr(task, "layout", None) or ""
            part.append(self._memo(("references", name, layout), lambda: reference_identity(name, layout)))
        return part
