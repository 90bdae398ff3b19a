"""What the judges of this process did: questions sent, replies served from the cache, retries,
failures, and the tokens the servers reported.

Every judge adds to the counters of its identity (``model@endpoint``), so judges built from one
configuration share them and a run can report what its judges cost.  A worker process sends the
change since its last report with each row (:class:`UsageForwarder`); its parent adds it to its own
counters (:func:`merge_usage`).  Tokens are summed only over replies whose server reported them,
counted in ``tokens_reported_replies``: an endpoint that reports no usage leaves the totals
unknown, never zero.
"""

from __future__ import annotations

import threading
from typing import Any, Mapping

FIELDS: tuple[str, ...] = (
    "requests",  # questions sent over the wire (or, in-process, to the model), retries apart
    "replies",  # of those, the ones answered
    "failures",  # of those, the ones that failed after every attempt
    "retries",  # attempts after a question's first
    "cache_hits",  # questions answered from the reply cache
    "prompt_tokens",
    "completion_tokens",
    "tokens_reported_replies",  # replies whose server reported token usage
)
Counts = dict[str, int]


def judge_identity(model: str, endpoint: str | None) -> str:
    """``model@endpoint`` (``model@local`` for an in-process judge), the key of a judge's counters;
    callers pass the endpoint without its credentials (``judge_endpoint.without_credentials``)."""
    return f"{model}@{endpoint.rstrip('/') if endpoint else 'local'}"


class JudgeUsage:
    """Thread-safe counters of one judge identity."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counts = dict.fromkeys(FIELDS, 0)

    def add(self, **deltas: int) -> None:
        with self._lock:
            for name, value in deltas.items():
                if name not in self._counts:
                    raise KeyError(f"unknown judge usage counter {name!r}")
                self._counts[name] += int(value)

    def request(self) -> None:
        self.add(requests=1)

    def cache_hit(self) -> None:
        self.add(cache_hits=1)

    def retry(self) -> None:
        self.add(retries=1)

    def failure(self) -> None:
        self.add(failures=1)

    def reply(self, tokens: tuple[int, int] | None) -> None:
        """An answered request, with ``(prompt, completion)`` tokens when they are known."""
        if tokens is None:
            self.add(replies=1)
        else:
            self.add(replies=1, prompt_tokens=tokens[0], completion_tokens=tokens[1], tokens_reported_replies=1)

    def counts(self) -> Counts:
        with self._lock:
            return dict(self._counts)


_USAGE: dict[str, JudgeUsage] = {}
_USAGE_LOCK = threading.Lock()


def usage_for(identity: str) -> JudgeUsage:
    """The process-wide counters of the judge ``identity`` (see :func:`judge_identity`)."""
    with _USAGE_LOCK:
        if identity not in _USAGE:
            _USAGE[identity] = JudgeUsage()
        return _USAGE[identity]


def usage_totals() -> dict[str, Counts]:
    """Counts per judge identity since this process started (with what its workers forwarded)."""
    with _USAGE_LOCK:
        judges = list(_USAGE.items())
    return {identity: usage.counts() for identity, usage in judges}


def usage_since(before: Mapping[str, Mapping[str, int]], after: Mapping[str, Mapping[str, int]] | None = None) -> dict[str, Counts]:
    """The change from ``before`` to ``after`` (default: now); judges that did nothing are left out."""
    now = usage_totals() if after is None else after
    delta = {}
    for identity, counts in now.items():
        old = before.get(identity, {})
        change = {name: int(counts.get(name, 0)) - int(old.get(name, 0)) for name in FIELDS}
        if any(change.values()):
            delta[identity] = change
    return delta


def merge_usage(delta: Mapping[str, Mapping[str, Any]]) -> None:
    """Add a worker's forwarded change to this process's counters."""
    for identity, counts in delta.items():
        usage_for(str(identity)).add(**{name: int(value) for name, value in counts.items() if name in FIELDS})


class UsageForwarder:
    """In a worker process: the change in usage since the last call, to send with each row."""

    def __init__(self) -> None:
        self._sent = usage_totals()

    def new(self) -> dict[str, Counts]:
        now = usage_totals()
        delta = usage_since(self._sent, now)
        self._sent = now
        return delta


def _readable(counts: Mapping[str, int]) -> dict[str, Any]:
    """Counts for people: token sums are ``None`` (unknown) when no reply reported them."""
    shown: dict[str, Any] = {name: int(counts.get(name, 0)) for name in FIELDS}
    if not shown["tokens_reported_replies"]:
        shown["prompt_tokens"] = shown["completion_tokens"] = None
    return shown


def usage_report(delta: Mapping[str, Mapping[str, int]], roles: Mapping[str, str | None] | None = None) -> dict[str, Any]:
    """The JSON-ready ``judge_usage`` section of a run summary: per judge, in total, and which
    judge each configured role goes to."""
    total = {name: sum(int(counts.get(name, 0)) for counts in delta.values()) for name in FIELDS}
    return {
        "judges": {identity: _readable(counts) for identity, counts in sorted(delta.items())},
        "roles": {role: identity for role, identity in (roles or {}).items() if identity is not None},
        "total": _readable(total),
    }
