"""Which backend serves each capability in this process.

Configured with specs ``capability=backend`` or ``capability=backend@source`` (a hub id or a local
path), from ``--model`` options or the ``MMVERIFY_MODELS`` setting (comma-separated) of the scoring
context in force (:mod:`mmverify.pipelines.context`; worker processes receive their parent's).
Backends are created on first use and shared by all tasks.

A spec may end in constructor options, ``?name=value`` joined by ``&``:
``audio_text=clap-hf@/models/clap?precision=bf16&batch_size=64`` or ``audio_text=clap-hf?features=numpy``.
Any keyword of the backend's constructor except source, device and cache is an option; values take
the type of its default (integers, true/false, text).  ``precision`` (fp32, bf16, fp16) can also be
set for every backend that has it, with ``MMVERIFY_PRECISION``; a spec's own option wins.
"""

from __future__ import annotations

import inspect
import os
import threading
import typing
from collections import OrderedDict
from typing import Any, Mapping

from ..core.registry import UnknownIdError
from ..core.settings import HasSettings, default_cache_dir, scoring_settings
from .base import ROW_RULES, Backend, ModelUnavailable, check_precision
from .cache import OutputCache
from .catalog import BACKEND_INFO, BACKEND_REGISTRY, CAPABILITIES
from .served import model_client

ENV_VAR = "MMVERIFY_MODELS"
PRECISION_ENV_VAR = "MMVERIFY_PRECISION"
_NOT_OPTIONS = ("source", "device", "cache")


def _family(capability: str) -> str:
    """Capabilities that differ only by language (``transcriber``, ``transcriber_zh``) share backends."""
    return capability.split("_zh")[0]


def split_options(spec: str) -> tuple[str, dict[str, str]]:
    """``"a=b@/m?precision=bf16&batch_size=64"`` -> ``("a=b@/m", {"precision": "bf16", "batch_size": "64"})``."""
    head, sep, query = spec.partition("?")
    options: dict[str, str] = {}
    for pair in query.split("&") if sep else []:
        key, eq, value = (part.strip() for part in pair.partition("="))
        if not eq or not key or not value:
            raise ValueError(f"model spec options must look like '?name=value&name=value', got {spec!r}")
        if key in options:
            raise ValueError(f"model spec option {key!r} is given twice in {spec!r}")
        options[key] = value
    return head, options


def _typed_option(name: str, key: str, text: str, default: Any, choices: tuple[str, ...] | None) -> Any:
    """``text`` as the type of the constructor default it replaces (and one of ``choices``, if any)."""
    if key == "batch_size":
        if not text.isdigit() or int(text) < 1:
            raise ValueError(f"option batch_size of backend {name!r} must be an integer >= 1, got {text!r}")
        return int(text)
    if key == "precision":
        return check_precision(text)
    if choices is not None and text not in choices:
        raise ValueError(f"option {key} of backend {name!r} must be one of {', '.join(choices)}, got {text!r}")
    try:
        if isinstance(default, bool):
            if text.lower() not in ("true", "false"):
                raise ValueError
            return text.lower() == "true"
        if isinstance(default, int):
            return int(text)
        if isinstance(default, float):
            return float(text)
    except ValueError:
        raise ValueError(f"option {key} of backend {name!r} must be of type {type(default).__name__}, got {text!r}") from None
    return text


def backend_options(name: str, options: Mapping[str, str]) -> dict[str, Any]:
    """Spec ``options`` as typed keyword arguments of backend ``name``'s constructor."""
    cls = BACKEND_REGISTRY.get(name)
    parameters = inspect.signature(cls).parameters
    allowed = {
        key: parameter for key, parameter in parameters.items()
        if key not in _NOT_OPTIONS and parameter.kind in (parameter.POSITIONAL_OR_KEYWORD, parameter.KEYWORD_ONLY)
    }  # fmt: skip
    choices = {"rows": ROW_RULES, **getattr(cls, "option_choices", {})}
    hints = typing.get_type_hints(cls.__init__)
    typed = {}
    for key, text in options.items():
        if key not in allowed:
            raise ValueError(f"backend {name!r} has no option {key!r} (options: {', '.join(sorted(allowed)) or 'none'})")
        default = allowed[key].default
        if default is None:  # an optional number ("max_new_tokens: int | None = None") is typed by its annotation
            kinds = [t for t in typing.get_args(hints.get(key)) if t in (int, float)]
            default = kinds[0]() if kinds else None
        typed[key] = _typed_option(name, key, text, default, choices.get(key))
    return typed


def parse_spec(spec: str) -> tuple[str, str, str | None]:
    """``"speaker=resemblyzer"`` -> ``("speaker", "resemblyzer", None)``; validates both names and any
    ``?options`` (which :func:`parse_spec_options` returns)."""
    spec, options = split_options(spec)
    capability, sep, rest = spec.partition("=")
    capability, rest = capability.strip(), rest.strip()
    if not sep or not capability or not rest:
        raise ValueError(f"model spec must look like 'capability=backend[@source]', got {spec!r}")
    name, _, source = rest.partition("@")
    if capability not in CAPABILITIES:
        raise UnknownIdError("capability", capability, sorted(CAPABILITIES))
    if name not in BACKEND_INFO:
        raise UnknownIdError("model backend", name, sorted(BACKEND_INFO))
    if _family(BACKEND_INFO[name].capability) != _family(capability):
        raise ValueError(f"backend {name!r} provides {BACKEND_INFO[name].capability!r}, not {capability!r}")
    backend_options(name, options)
    return capability, name, source or None


def parse_spec_options(text: str) -> dict[str, dict[str, Any]]:
    """The typed ``?options`` of each capability's spec in a comma-separated list."""
    found = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        capability, name, _ = parse_spec(item)
        found[capability] = backend_options(name, split_options(item)[1])
    return found


def parse_specs(text: str) -> dict[str, tuple[str, str | None]]:
    specs = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        capability, name, source = parse_spec(item)
        specs[capability] = (name, source)
    return specs


class ModelHub:
    def __init__(
        self,
        overrides: Mapping[str, tuple[str, str | None]] | None = None,
        device: str | None = None,
        cache: OutputCache | None = None,
        options: Mapping[str, Mapping[str, Any]] | None = None,
        precision: str | None = None,
        problem: str | None = None,
    ) -> None:
        self.problem = problem  # a configuration no backend can be built from (judges are unaffected)
        self.overrides = dict(overrides or {})
        self.device = device
        self.cache = cache
        self.options = {capability: dict(values) for capability, values in (options or {}).items()}
        self.precision = check_precision(precision) if precision else None
        self._instances: dict[str, Backend] = {}
        self._judges: dict[Any, Any] = {}
        self._lock = threading.Lock()
        self.warm_tasks: set[tuple[str, str]] = set()  # (task, profile) whose first use ran on this hub
        self.key: tuple | None = None  # the settings it was built under (get_hub sets it; see switch_hub)

    @classmethod
    def from_settings(cls, settings: Mapping[str, str]) -> "ModelHub":
        """Backends from MMVERIFY_MODELS; outputs cached in ``<cache dir>/outputs.sqlite``
        unless MMVERIFY_NO_OUTPUT_CACHE is set."""
        specs, options, precision, problem = {}, {}, settings.get(PRECISION_ENV_VAR) or None, None
        try:  # settings from the environment are checked here first: a problem is each backend's error
            text = settings.get(ENV_VAR, "")
            specs, options = parse_specs(text), parse_spec_options(text)
        except (UnknownIdError, ValueError) as exc:
            problem = f"{ENV_VAR}: {exc}"
        try:
            if precision:
                check_precision(precision)
        except ValueError as exc:
            precision, problem = None, problem or f"{PRECISION_ENV_VAR}: {exc}"
        no_cache = settings.get("MMVERIFY_NO_OUTPUT_CACHE") or problem
        cache = None if no_cache else OutputCache(default_cache_dir(settings) / "outputs.sqlite")
        return cls(
            specs, device=settings.get("MMVERIFY_DEVICE") or None, cache=cache, options=options, precision=precision,
            problem=problem,
        )  # fmt: skip

    @classmethod
    def from_context(cls, context: HasSettings | None = None) -> "ModelHub":
        """The hub ``context`` configures (default: the scoring context in force)."""
        return cls.from_settings(scoring_settings() if context is None else context.settings)

    @classmethod
    def from_env(cls) -> "ModelHub":
        """:meth:`from_context` of the context in force (the environment's while none is installed)."""
        return cls.from_context()

    def _create(self, name: str, source: str | None, **options: Any) -> Backend:
        cls = BACKEND_REGISTRY.get(name)
        parameters = inspect.signature(cls).parameters
        kwargs: dict[str, Any] = {"source": source, "device": self.device}
        if self.cache is not None and "cache" in parameters:
            kwargs["cache"] = self.cache
        if self.precision is not None and "precision" in parameters:
            kwargs["precision"] = self.precision
        backend = cls(**{**kwargs, **options})
        if cls.servable:  # in a worker of --model-process, its batches are computed there
            backend.server = model_client()
        return backend

    def choice(self, capability: str) -> tuple[str, str | None]:
        if capability in self.overrides:
            return self.overrides[capability]
        if capability not in CAPABILITIES:
            raise UnknownIdError("capability", capability, sorted(CAPABILITIES))
        return CAPABILITIES[capability], None

    def instance(self, capability: str) -> Backend:
        """The backend object for ``capability``, created on first use but not loaded."""
        if self.problem:
            raise ModelUnavailable("models", self.problem)
        with self._lock:
            if capability not in self._instances:
                self._instances[capability] = self._create(*self.choice(capability), **self.options.get(capability, {}))
            return self._instances[capability]

    def backend(self, capability: str) -> Any:
        """The loaded backend for ``capability``; ``ModelUnavailable`` says how to get it."""
        backend = self.instance(capability)
        try:
            backend.ensure_loaded()
        except ModelUnavailable as exc:
            raise _with_alternatives(exc, capability, backend.name) from None
        except ImportError as exc:
            unavailable = ModelUnavailable(backend.name, f"cannot import its package ({exc})")
            raise _with_alternatives(unavailable, capability, backend.name) from None
        return backend

    def judge(self, role: str = "default") -> Any:
        """The :class:`~mmverify.models.protocols.VisionLanguageJudge` for ``role`` ("default",
        "spatial", "spatial_relative", "spatial_absolute", "ocr", "ocr_second", "llm"; an unconfigured
        role falls back to its parent -- spatial_relative/spatial_absolute to spatial -- then "default").

        Read from the MMVERIFY_VLM_* settings in force on every call (``score --vlm-*`` sets them),
        so a changed configuration takes effect; equal configurations share one judge instance.
        """
        from .judge import NOT_CONFIGURED, build_judge, config_from_env

        config = config_from_env(role)
        if config is None:
            raise ModelUnavailable("vlm", NOT_CONFIGURED)
        built = (config, os.environ.get(config.api_key_env))  # a judge reads its key once, when built
        with self._lock:
            if built not in self._judges:
                judge = self._judges[built] = build_judge(config)
                if getattr(judge, "servable", False):  # in a worker of --model-process, it generates there
                    judge.server, judge.role = model_client("judge"), role
            return self._judges[built]


def usable_alternatives(capability: str, exclude: str | None = None) -> list[str]:
    """Other backends of ``capability`` that are usable here as they stand (nothing is loaded)."""
    usable = []
    for info in BACKEND_INFO.values():
        if info.capability == capability and info.name != exclude:
            try:
                if BACKEND_REGISTRY.get(info.name)(source=None).availability().ok:
                    usable.append(info.name)
            except Exception:  # a backend whose check itself fails is simply not offered
                continue
    return usable


def _with_alternatives(exc: ModelUnavailable, capability: str, name: str) -> ModelUnavailable:
    """The same error, naming the other backends of the capability that are usable here."""
    others = usable_alternatives(capability, exclude=name)
    if not others:
        return exc
    hint = ", ".join(f"--model {capability}={other}" for other in others)
    widened = ModelUnavailable(name, f"{exc.message.split(': ', 1)[-1]}; usable here instead: {hint}")
    return widened


_HUB: ModelHub | None = None
PARKED_HUBS = 1  # hubs kept, models loaded, for settings in force before the current ones
_PARKED: "OrderedDict[tuple, ModelHub]" = OrderedDict()
# read elsewhere, or on every call (judges are kept per configuration): not part of a hub's key
_NOT_HUB_SETTINGS = ("MMVERIFY_REFERENCES", "MMVERIFY_VLM_")
_SWITCH_LOCK = threading.Lock()  # one thread at a time builds, parks or takes hubs
_process_key: tuple = ()  # the process variables the scoring context in force set (HF_HUB_OFFLINE, ...)


def _current_key() -> tuple:
    hub_settings = ((k, v) for k, v in scoring_settings().items() if not k.startswith(_NOT_HUB_SETTINGS))
    return (tuple(sorted(hub_settings)), _process_key)


def get_hub() -> ModelHub:
    """The process-wide hub, configured on first use by the scoring context in force (installing
    another context swaps it, see :func:`switch_hub`; so do changed ``MMVERIFY_*`` variables while no
    context is installed, since settings are then read from the environment at call time)."""
    global _HUB
    wanted = _current_key()
    with _SWITCH_LOCK:
        if _HUB is not None and _HUB.key is not None and _HUB.key != wanted:
            _take(wanted)
        if _HUB is None:
            _HUB = ModelHub.from_context()
            _HUB.key = wanted
        return _HUB


def _take(wanted: tuple) -> None:
    """Park the hub in force under its settings; take the one parked under ``wanted``, if any."""
    global _HUB
    if _HUB is not None and _HUB.key is not None:  # a hub built by hand (tests) is not kept
        _PARKED[_HUB.key] = _HUB
        _PARKED.move_to_end(_HUB.key)
    _HUB = _PARKED.pop(wanted, None)
    while len(_PARKED) > PARKED_HUBS:
        _PARKED.popitem(last=False)


def switch_hub(process_environment: Mapping[str, str]) -> None:
    """Another scoring context is in force, and it set ``process_environment``: keep the hub when
    what it reads is unchanged; else park it, models loaded, under the settings it was built with,
    and take back the one parked under the new settings -- so alternating between two
    :class:`~mmverify.pipelines.reward.Reward` objects does not load their models again on every
    call.  At most :data:`PARKED_HUBS` are kept (each holds its models in memory)."""
    global _process_key
    _process_key = tuple(sorted(process_environment.items()))
    wanted = _current_key()
    with _SWITCH_LOCK:
        if _HUB is None or _HUB.key != wanted:
            _take(wanted)


def drop_hubs() -> None:
    """Forget the hub in force and every parked one (their models are freed once unused)."""
    global _HUB, _process_key
    _HUB, _process_key = None, ()
    _PARKED.clear()
