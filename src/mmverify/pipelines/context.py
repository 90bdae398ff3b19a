"""The scoring context: every setting besides the items that decides what a run computes.

``mmverify score``, ``mmverify serve``, ``mmverify references build`` and
:class:`~mmverify.pipelines.reward.Reward` each build one :class:`ScoringContext` from their options
and :func:`install` it; nothing else writes model, reference, device, precision, cache or judge
settings.  A context resolves, once, into :attr:`ScoringContext.settings`: the ``MMVERIFY_*``
variables it decides, its options over those the environment held when it was built (never over
another context's, so a context means the same whatever was installed before).  Every reader (the
model hub, reference sets, judge configuration, result keys) reads the installed context's settings
through :func:`mmverify.core.settings.scoring_settings`; while none is installed they come from the
environment at call time, so ``MMVERIFY_*`` variables alone still configure library use.

Worker processes (``--workers N``, Ray actors) receive the context explicitly: the executors run
:func:`install_context` with it in every worker before its first item.  The environment is no
transport: installing sets only the variables that third-party libraries read themselves
(``HF_HUB_OFFLINE`` for offline runs, and any non-``MMVERIFY_`` names in ``env``).  What the settings
choose is part of every model task's result key (:mod:`mmverify.pipelines.model_keys`: the backends
a task declares, by checkpoint content, options, device type and precision; its reference files;
and the judge identities), so a run with another checkpoint, device, precision or judge rescores
instead of reusing rows.
"""

from __future__ import annotations

import os
import sys
import threading
from collections import deque
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from types import MappingProxyType
from typing import Iterator, Mapping, Sequence

from ..core.registry import UnknownIdError
from ..core.settings import (
    SETTINGS_PREFIX, environment_settings, installed_context, scoring_settings, set_installed_context,
)  # fmt: skip
from ..core.waits import wait_s
from ..models.base import check_device, check_precision


@dataclass(frozen=True)
class JudgeOptions:
    """The judge settings of ``--vlm-*``: a default endpoint and model, and per-role overrides
    (``ROLE=MODEL[@URL]``)."""

    base_url: str | None = None
    model: str | None = None
    roles: tuple[str, ...] = ()
    concurrency: int | None = None
    api_key_env: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "roles", tuple(self.roles))  # a list of roles equals the same tuple


def _joined(values: str | Sequence[str] | None) -> str:
    if not values:
        return ""
    return values if isinstance(values, str) else ",".join(values)


@dataclass(frozen=True)
class ScoringContext:
    """``models``: ``capability=backend[@source][?options]`` specs; ``references``: ``name=folder``
    reference sets; ``device``/``precision``: for torch backends; ``offline``: never touch the
    network; ``cache_dir``: embeddings, transcripts and judge replies; ``judge``: see
    :class:`JudgeOptions`; ``env``: further variables (``MMVERIFY_*`` ones are settings, e.g.
    ``MMVERIFY_WAVLM_SV_SOURCE``; others go to the process environment for the libraries reading
    them).  ``base``: the settings the options override (default: the environment's when built).
    Invalid values raise ``ValueError`` naming the option, before anything is changed."""

    models: str | Sequence[str] | None = None
    references: str | Sequence[str] | None = None
    device: str | None = None
    precision: str | None = None
    offline: bool = False
    cache_dir: str | Path | None = None
    judge: JudgeOptions = field(default_factory=JudgeOptions)
    env: Mapping[str, str] | None = None
    base: Mapping[str, str] = field(default_factory=environment_settings, repr=False)

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> "ScoringContext":
        """The context ``environ`` alone describes (default: this process's environment now)."""
        return cls(base=environment_settings(environ))

    def __post_init__(self) -> None:
        from ..models.hub import parse_specs
        from ..models.judge_config import apply_cli_options
        from ..references.sets import parse_references

        # plain dicts, so the context pickles into worker processes whatever mapping it was given
        object.__setattr__(self, "base", dict(self.base))
        if self.env is not None:
            object.__setattr__(self, "env", dict(self.env))
        # one spelling per setting, so contexts that mean the same are equal (and share their turn)
        object.__setattr__(self, "models", _joined(self.models) or None)
        object.__setattr__(self, "references", _joined(self.references) or None)
        if self.cache_dir is not None:
            object.__setattr__(self, "cache_dir", str(self.cache_dir))
        if self.precision:
            check_precision(self.precision)
        if self.device:
            try:
                check_device(self.device)
            except ImportError:  # no torch: no backend here takes a device
                pass
        for name, parse, text in (("models", parse_specs, self.models), ("references", parse_references, self.references)):
            try:
                parse(_joined(text))
            except (KeyError, UnknownIdError, ValueError) as exc:
                raise ValueError(f"{name}: {exc}") from None
        judge = self.judge
        try:
            apply_cli_options(  # validates the judge options, writing into a scratch mapping
                base_url=judge.base_url, model=judge.model, roles=judge.roles, concurrency=judge.concurrency,
                api_key_env=judge.api_key_env, environ={},
            )  # fmt: skip
        except (KeyError, UnknownIdError) as exc:
            raise ValueError(str(exc)) from None

    def _option_variables(self) -> dict[str, str]:
        """The variables the options name, settings and third-party ones alike."""
        from ..models.hub import ENV_VAR as MODELS_VAR, PRECISION_ENV_VAR
        from ..models.judge_config import apply_cli_options
        from ..references.sets import ENV_VAR as REFERENCES_VAR

        variables = {str(name): str(value) for name, value in (self.env or {}).items()}
        if self.offline:
            variables.update(HF_HUB_OFFLINE="1", MMVERIFY_OFFLINE="1")
        if self.cache_dir is not None:
            variables["MMVERIFY_CACHE_DIR"] = str(self.cache_dir)
        if self.device:
            variables["MMVERIFY_DEVICE"] = self.device
        if self.precision:
            variables[PRECISION_ENV_VAR] = self.precision
        if self.models:
            variables[MODELS_VAR] = _joined(self.models)
        if self.references:
            variables[REFERENCES_VAR] = _joined(self.references)
        judge = self.judge
        apply_cli_options(
            base_url=judge.base_url, model=judge.model, roles=judge.roles, concurrency=judge.concurrency,
            api_key_env=judge.api_key_env, environ=variables,
        )  # fmt: skip
        return variables

    @cached_property
    def _resolved(self) -> dict[str, str]:  # computed once; a plain dict, so the context pickles
        chosen = {name: value for name, value in self._option_variables().items() if name.startswith(SETTINGS_PREFIX)}
        return dict(sorted({**self.base, **chosen}.items()))

    @property
    def settings(self) -> Mapping[str, str]:
        """The ``MMVERIFY_*`` settings of this context (read-only): what every reader sees once it
        is installed."""
        return MappingProxyType(self._resolved)

    def process_environment(self) -> dict[str, str]:
        """The variables installing sets in the process environment: those third-party libraries
        read themselves (``HF_HUB_OFFLINE``, and ``env``'s names outside ``MMVERIFY_``)."""
        return {name: value for name, value in self._option_variables().items() if not name.startswith(SETTINGS_PREFIX)}

    def apply(self) -> bool:
        """:func:`install` this context; True if anything changed."""
        return install(self)


def _forget_built_state() -> None:
    """Drop every hub (models) and every reference set read so far."""
    hub_module = sys.modules.get("mmverify.models.hub")
    if hub_module is not None:
        hub_module.drop_hubs()  # type: ignore[attr-defined]
    sets_module = sys.modules.get("mmverify.references.sets")
    if sets_module is not None:
        sets_module.clear_memo()  # type: ignore[attr-defined]


_SET_VARIABLES: dict[str, str | None] = {}  # process variables installing set -> their value before


def _set_process_environment(wanted: Mapping[str, str]) -> bool:
    """Set ``wanted`` in the process environment, and put back what an earlier install set and
    ``wanted`` no longer names (an offline run followed by an online one leaves nothing behind)."""
    changed = False
    for name in [n for n in _SET_VARIABLES if n not in wanted]:
        previous = _SET_VARIABLES.pop(name)
        if previous is None:
            changed |= os.environ.pop(name, None) is not None
        elif os.environ.get(name) != previous:
            os.environ[name], changed = previous, True
    for name, value in wanted.items():
        if os.environ.get(name) != value:
            _SET_VARIABLES.setdefault(name, os.environ.get(name))
            os.environ[name], changed = value, True
    return changed


def _install(context: ScoringContext | None) -> bool:
    """Make ``context`` this process's scoring context (None: none, settings come from the
    environment) and set its :meth:`~ScoringContext.process_environment`; when what the model hub
    reads changes, the hub in force is parked (its models stay loaded) and the new settings' hub
    comes back or is built on next use (see :func:`~mmverify.models.hub.switch_hub`).  True if
    anything changed."""
    before = dict(scoring_settings())
    set_installed_context(context)
    process_environment = context.process_environment() if context is not None else {}
    environment_changed = _set_process_environment(process_environment)
    settings_changed = dict(scoring_settings()) != before
    if settings_changed or environment_changed:
        hub_module = sys.modules.get("mmverify.models.hub")
        if hub_module is not None:  # (reference sets are kept by folder: they need no switch)
            hub_module.switch_hub(process_environment)  # type: ignore[attr-defined]
    return settings_changed or environment_changed


class _ContextGate:
    """Scoring calls hold the installed context for their whole length.  Calls under equal contexts
    share it; a call under another waits until they are done (first come, first served) and then
    installs its own.  So a call never sees its settings or models change half-way -- two rewards
    used from two threads (TRL gathering an image and an audio reward) take turns instead of
    scoring with each other's models."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._held: ScoringContext | None = None
        self._holders: set[object] = set()  # a token per call in flight
        self._restore: tuple[ScoringContext | None] | None = None  # what the last holder puts back
        self._queue: deque[object] = deque()
        self._depth = threading.local()  # calls this thread holds (a call may make nested calls)

    @contextmanager
    def hold(self, context: ScoringContext, *, restore: bool = False) -> Iterator[None]:
        """``context`` installed and unchanged inside the block; with ``restore`` the context in
        force before comes back when the last holder leaves."""
        depth = getattr(self._depth, "calls", 0)
        token, entered = object(), False
        try:
            with self._changed:
                if depth:  # waiting here would wait for this very thread
                    if context != self._held:
                        raise RuntimeError("a scoring call cannot start another under different settings in the same thread")
                else:
                    self._wait_for_turn(context)
                if not self._holders:
                    previous = installed_context()
                    _install(context)
                    self._held = context
                    self._restore = (previous if isinstance(previous, ScoringContext) else None,) if restore else None
                entered = True  # before the token goes in: leaving forgets a token that never did
                self._holders.add(token)
                self._changed.notify_all()
            self._depth.calls = depth + 1
            yield
        finally:
            self._depth.calls = depth
            if entered:
                self._leave(token)

    def _leave(self, token: object) -> None:
        """Forget ``token``; the last holder out puts back what it should.  Repeatable, so an
        interrupt (^C, a trainer's SIGALRM) landing here cannot leave a holder behind: the gate is
        left first, then the interrupt goes on."""
        interrupted: BaseException | None = None
        while True:
            try:
                with self._changed:
                    self._holders.discard(token)
                    if not self._holders and self._held is not None:
                        # the state first, so a second pass finds nothing left to do
                        restore, self._held, self._restore = self._restore, None, None
                        if restore is not None:
                            _install(restore[0])
                    self._changed.notify_all()
                break
            except BaseException as exc:  # noqa: BLE001  (re-raised below, once the gate is left)
                interrupted = exc
        if interrupted is not None:
            try:
                raise interrupted
            finally:
                interrupted = None  # no cycle through this frame (see execute.end_if_late)

    def _wait_for_turn(self, context: ScoringContext) -> None:
        ticket = object()
        self._queue.append(ticket)
        try:
            while not (self._queue[0] is ticket and (not self._holders or self._held == context)):
                self._changed.wait(wait_s())  # wakes in time, so a deadline raised here is delivered
        finally:  # also when a deadline or ^C interrupts the wait: the calls behind must not wait for it
            self._queue.remove(ticket)
            self._changed.notify_all()

    def offer(self, context: ScoringContext) -> None:
        """Install ``context`` if no call holds one or waits; otherwise leave the calls in flight
        alone (``context`` is installed when its own calls run)."""
        with self._changed:
            if not self._holders and not self._queue:
                _install(context)

    def install(self, context: ScoringContext | None, *, forget_built_state: bool = False) -> bool:
        """Install ``context`` once the calls in flight under another one are done (in turn with
        the calls waiting), and with ``forget_built_state`` drop the hubs and reference sets built
        so far; True if anything changed.  A thread that a call in flight started (its item
        threads) must not install another context: it would wait for that call, so for itself."""
        if getattr(self._depth, "calls", 0):  # waiting here would wait for this very thread
            if context != self._held:
                raise RuntimeError("a scoring call cannot change the scoring context in its own thread")
            return False
        with self._changed:
            self._wait_for_turn(context)
            if self._holders:  # they hold this very context: it stays when they leave
                self._restore, changed = None, False
            else:
                changed = _install(context)
            if forget_built_state:
                _forget_built_state()
            return changed


_GATE = _ContextGate()


def install(context: ScoringContext | None) -> bool:
    """Make ``context`` this process's scoring context (None: none, settings come from the
    environment), after the scoring calls in flight under another one are done -- a call never sees
    its settings change half-way.  True if anything changed."""
    return _GATE.install(context)


def holding(context: ScoringContext) -> AbstractContextManager[None]:
    """``context`` installed for the length of a scoring call (see :class:`_ContextGate`); it stays
    installed after the call."""
    return _GATE.hold(context)


def offer(context: ScoringContext) -> None:
    """Install ``context`` unless scoring calls under another one are in flight (see :class:`_ContextGate`)."""
    _GATE.offer(context)


@contextmanager
def installed(context: ScoringContext | None) -> Iterator[None]:
    """``context`` in force inside the block (None: whatever is in force already); the context
    in force before comes back after it, so one library call cannot configure the next."""
    if context is None:
        yield
        return
    with _GATE.hold(context, restore=True):
        yield


def install_context(context: ScoringContext) -> None:
    """The executors' worker initializer: run once in every worker process before its first item."""
    _install(context)


def current() -> ScoringContext:
    """The installed context, or -- while none is -- the one the environment describes now."""
    installed = installed_context()
    if isinstance(installed, ScoringContext):
        return installed
    return ScoringContext.from_environment()


def reset() -> None:
    """Forget the installed context: settings come from the environment again (tests, notebooks)."""
    _GATE.install(None, forget_built_state=True)
