"""What a model task's result key says of the models and reference files behind its rows.

For each capability a task's catalog row declares, the key names the backend serving it in the
scoring context in force by its fingerprint -- checkpoint by content, batch rows, device type,
feature front end, precision -- and by its spec options (decode length, ...).  A task that compares
with a reference set adds the content digest and class label of every file its layout reads.  So
a checkpoint or reference clip replaced in place, a reference file added, or another backend or
option gives new keys and a rescore, while the same files in another folder, or settings a task
does not use (another capability's checkpoint, other tasks' reference sets, a precision its backend
has no option for), leave its keys alone.

Nothing is loaded or downloaded.  Files are hashed where they lie, each large file once per change
(:func:`mmverify.models.digests.whole_file_sha256`), and each backend and reference set once per
planner (a ``score`` run; a ``Reward`` or server for its life).  A backend or reference set that
cannot be used when first planned is named by what was asked for (backend and source, or folder):
its rows are ``model_unavailable`` errors, and the next run, once it is usable, gives new keys and
rescores them.  The device type is the one this process resolves; executors whose workers see
other devices name theirs in the context (see :func:`mmverify.pipelines.score.with_worker_device`).
Judges reached over HTTP are not covered here: judged tasks key their model and endpoint
themselves.  A judge run in this process (``transformers:<checkpoint>``) is, as a backend is: by its
checkpoint's content and the device type it runs on (:meth:`ModelKeys.local_judges`).
"""

from __future__ import annotations

from typing import Any, Iterable

from ..core.hashing import digest_of
from ..core.settings import scoring_settings
from ..tasks.catalog import judge_role

MODEL_KEY_SCHEME = "mmverify-models/2"


def backend_identity(capability: str) -> dict[str, Any]:
    """What decides ``capability``'s outputs in the scoring context in force (see the module).  Where
    that cannot be known here, what was asked for (its rows are errors that say why)."""
    from ..models.base import missing_packages
    from ..models.hub import get_hub

    hub = get_hub()
    identity: dict[str, Any] = {"capability": capability, "options": dict(sorted(hub.options.get(capability, {}).items()))}
    try:
        backend = hub.instance(capability)
    except Exception as exc:  # model specs that do not parse, options its constructor refuses
        return {**identity, "unusable": type(exc).__name__, "asked": hub.problem or list(hub.choice(capability))}
    try:
        missing = missing_packages(getattr(backend, "packages", ()))
        if missing:  # installing them changes the key, so the rows saying they are missing are rescored
            return {**identity, "unusable": f"missing {', '.join(missing)}", "asked": _asked(backend)}
        identity["backend"] = backend.fingerprint
    except Exception as exc:  # no checkpoint, ...
        return {**identity, "unusable": type(exc).__name__, "asked": _asked(backend)}
    return identity


def local_judge_identity(role: str, model: str) -> dict[str, Any]:
    """A judge role served in this process by checkpoint ``model`` (``transformers:<path>``): its
    fingerprint -- checkpoint by content, device type -- or, where that cannot be known, what was asked."""
    from ..models.judge_config import LOCAL_PREFIX
    from ..models.judge_local import TransformersVLMJudge

    try:
        return {"judge_role": role, "judge": TransformersVLMJudge(model[len(LOCAL_PREFIX) :]).fingerprint}
    except Exception as exc:  # no such checkpoint, ...: its rows say why, and a usable one rescores them
        return {"judge_role": role, "unusable": type(exc).__name__, "asked": model}


def _asked(backend: Any) -> str:
    return f"{getattr(backend, 'name', type(backend).__name__)}@{getattr(backend, 'source', None)}"


def reference_identity(name: str, layout: str) -> dict[str, Any]:
    """Reference set ``name`` as ``layout`` reads it from its configured folder: each file's name
    within the set, class label and content digest (the folder itself does not count)."""
    from ..models.digests import whole_file_sha256
    from ..references.layouts import scan
    from ..references.sets import configured_root

    identity: dict[str, Any] = {"reference_set": name, "layout": layout}
    root: Any = None
    try:
        root = configured_root(name)
        files = sorted([ref.name, ref.label, whole_file_sha256(ref.path)] for ref in scan(layout, root))
    except Exception as exc:  # not configured, unreadable, malformed metadata: its rows say which
        return {**identity, "unusable": type(exc).__name__, "root": None if root is None else str(root)}
    identity["files"] = digest_of(files)  # one digest: a key is worked out per item
    return identity


class ModelKeys:
    """The model part of result keys, worked out once per capability (and reference set) and
    scoring settings: a planner's keys stay cheap while each item names what scored it."""

    def __init__(self) -> None:
        self._known: dict[tuple, Any] = {}

    def _memo(self, what: tuple, compute: Any) -> Any:
        if what not in self._known:
            self._known[what] = compute()
        return self._known[what]

    def of(self, needs: Iterable[str], task: Any) -> list[Any]:
        """The key part for a task with catalog ``needs`` (judges excluded); ``task``'s
        ``reference_set`` and ``layout``, where it has them, add that reference set."""
        settings = tuple(sorted(scoring_settings().items()))  # read once per item
        part: list[Any] = [MODEL_KEY_SCHEME]
        for capability in sorted(set(needs)):
            if judge_role(capability) is None:
                part.append(self._memo(("backend", capability, settings), lambda c=capability: backend_identity(c)))
        name = getattr(task, "reference_set", None)
        if name:
            layout = getattr(task, "layout", None) or ""
            part.append(self._memo(("references", name, layout, settings), lambda: reference_identity(name, layout)))
        return part

    def local_judges(self, task: Any) -> list[Any]:
        """The identities of ``task``'s judge roles served in this process (none for judges over HTTP,
        whose model and endpoint the task's own key names); worked out once per roles and settings."""
        from ..models.judge_config import config_from_env

        roles = tuple(getattr(task, "roles", ()))
        if not roles:
            return []
        settings = tuple(sorted(scoring_settings().items()))

        def identities() -> list[Any]:
            configs = [(role, config_from_env(role)) for role in roles]
            return [local_judge_identity(role, config.model) for role, config in configs if config is not None and config.is_local]

        return self._memo(("judges", roles, settings), identities)
