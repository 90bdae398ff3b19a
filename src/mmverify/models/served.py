"""Backends whose model runs in another process: the item processes' side.

With ``mmverify score --workers N --model-process``, one process holds the models that can be
served (:attr:`~.base.Backend.servable`) on the device, and the N worker processes do the
per-item work around them: decoding, resampling, cropping, cache look-ups, rows.  Each process
then brings its own interpreter lock to that work while the device sees one process, one copy of
each model and full batches (:mod:`mmverify.pipelines.model_process` is the serving side).

In a worker, such a backend loads nothing: it asks the model process which device it computes on
(part of its fingerprint) and what preparing its inputs needs
(:meth:`~.base.Backend.worker_settings`: a sample rate, a window, labels), so a worker imports
neither torch nor transformers for it.  It batches its items' inputs in its round as always
(:mod:`.batching`); each batch's computation, named by the backend
(:meth:`~.base.Backend.computation`), is sent to the model process, which runs the same
computation on the same batch: the same bytes as computing it here.

The wire is :mod:`mmverify.core.decode_worker`'s (a JSON header and raw array bytes), over a Unix
socket in a folder only this user can enter, opened with a token the parent hands out.  Values
are arrays, text, numbers, lists, tuples and dicts, encoded as JSON with the arrays apart: nothing
is unpickled.  When the model process goes away the worker ends at once (exit code
:data:`MODEL_PROCESS_LOST`) rather than turning its items into error rows; the parent then ends
the run, and a run started again resumes where it stopped.
"""

from __future__ import annotations

import builtins
import itertools
import os
import queue
import socket
import threading
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Callable

import numpy as np

from ..core.decode_worker import ProtocolError, SocketStream, arrays_in, description, payload_bytes, read_message, write_message
from ..core.waits import wait_s
from ..core.errors import ScoringError, raised_at
from .base import ModelUnavailable
from .rows import Compute, Staged

PROTOCOL = "mmverify-models/1"
MODEL_PROCESS_LOST = 76  # a worker's exit code when its model process went away
MODEL_PROCESS_STUCK = 77  # ... when its items timed out waiting for a batch the model process still computes
GONE = "the model process went away"


# -- values on the wire ----------------------------------------------------------------------------
def pack(value: Any) -> tuple[Any, list[np.ndarray]]:
    """``value`` as JSON-ready data and the arrays it holds, each array once however often it
    appears (a padded batch repeats its first input)."""
    arrays: list[np.ndarray] = []
    index_of: dict[int, int] = {}

    def walk(item: Any) -> Any:
        if isinstance(item, np.ndarray):
            if item.dtype.hasobject or item.dtype.fields is not None:  # bytes alone would not say what they hold
                raise TypeError(f"cannot send an array of dtype {item.dtype} to the model process")
            if id(item) not in index_of:
                index_of[id(item)] = len(arrays)
                arrays.append(item)
            return {"array": index_of[id(item)]}
        if isinstance(item, np.generic):
            return {"scalar": walk(np.asarray(item))}
        if isinstance(item, list):
            return [walk(part) for part in item]
        if isinstance(item, tuple):
            return {"tuple": [walk(part) for part in item]}
        if isinstance(item, dict):
            return {"dict": [[walk(key), walk(part)] for key, part in item.items()]}
        if item is None or isinstance(item, (bool, int, float, str)):
            return item
        raise TypeError(f"cannot send a {type(item).__name__} to the model process")

    return walk(value), arrays


def unpack(data: Any, arrays: list[np.ndarray]) -> Any:
    """The value :func:`pack` described, on ``arrays``."""
    if isinstance(data, list):
        return [unpack(part, arrays) for part in data]
    if not isinstance(data, dict):
        return data
    if "array" in data:
        return arrays[data["array"]]
    if "scalar" in data:
        return unpack(data["scalar"], arrays)[()]
    if "tuple" in data:
        return tuple(unpack(part, arrays) for part in data["tuple"])
    return {unpack(key, arrays): unpack(part, arrays) for key, part in data["dict"]}


def value_message(header: dict[str, Any], value: Any, key: str) -> tuple[Any, ...]:
    """``header`` with ``value`` under ``key`` and its arrays' layouts, then the arrays' bytes: what
    :func:`~mmverify.core.decode_worker.write_message` sends.  TypeError for what cannot be sent."""
    data, arrays = pack(value)
    header = {**header, key: data, "arrays": [description(array) for array in arrays]}
    return (header, *(payload_bytes(array) for array in arrays))


def received_value(header: dict[str, Any], payload: Any, key: str) -> Any:
    return unpack(header[key], arrays_in(header["arrays"], payload))


def error_reply(exc: BaseException) -> dict[str, Any]:
    """What the model process sends back for a computation that raised ``exc``: its type and the
    builtin it derives from, its code (a :class:`ScoringError`), arguments, message and where it
    was raised, so that the worker's row reads as one process's."""
    if isinstance(exc, ModelUnavailable):
        return {"type": "ModelUnavailable", "backend": exc.backend, "message": exc.message.removeprefix(f"{exc.backend}: ")}
    if isinstance(exc, ScoringError):
        return {"type": "ScoringError", "code": exc.code, "message": exc.message}
    try:
        message = str(exc)
    except Exception:  # noqa: BLE001  (a __str__ that raises must not cost the batch its answer)
        message = ""
    base = next((kind for kind in type(exc).__mro__ if _builtin_error(kind.__name__) is kind), Exception)
    reply: dict[str, Any] = {"type": type(exc).__name__, "base": base.__name__, "message": message, "at": raised_at(exc)}
    if type(exc) is base and all(isinstance(arg, (str, int)) or arg is None for arg in exc.args):
        reply["args"] = list(exc.args)  # a builtin says what its arguments say (KeyError quotes its key)
    return reply


def raised(error: dict[str, Any]) -> Exception:
    """The exception a worker raises for an error reply: of the same type where it is a builtin (or
    a :class:`ScoringError`), elsewhere of a class named as the type and derived from the same
    builtin, so that the same handlers catch it; with the same message, and telling where it was
    raised (:func:`~mmverify.core.errors.raised_at`)."""
    if error["type"] == "ModelUnavailable":
        return ModelUnavailable(error["backend"], error["message"])
    if error["type"] == "ScoringError":
        return ScoringError(error["code"], error["message"])
    exc = _rebuilt(error["type"], error.get("base", "RuntimeError"), error.get("args"), error["message"])
    if "at" in error:
        exc.raised_at = error["at"]  # type: ignore[attr-defined]
    return exc


def _rebuilt(name: str, base: str, args: list[Any] | None, message: str) -> Exception:
    """The builtin ``name`` made from ``args`` (or ``message``) where that reads as ``message``;
    else an instance of a class named ``name`` whose text is ``message``, derived from the nearest
    builtin (itself included) whose constructor takes a message alone."""
    builtin = _builtin_error(name)
    if builtin is not None:
        try:
            exc = builtin(*(args if args is not None else [message]))
            if str(exc) == message:  # not so for an OSError's file name, a KeyError's tuple key
                return exc
        except Exception:  # noqa: BLE001  (a constructor that wants more: UnicodeDecodeError)
            pass
    for ancestor in (builtin or _builtin_error(base) or RuntimeError).__mro__:
        if _builtin_error(ancestor.__name__) is ancestor:
            try:
                return _remote_class(name, ancestor)(message)
            except Exception:  # noqa: BLE001
                continue
    return _remote_class(name, Exception)(message)


def _builtin_error(name: str) -> type[Exception] | None:
    kind = getattr(builtins, name, None)
    return kind if isinstance(kind, type) and issubclass(kind, Exception) else None


_REMOTE_CLASSES: dict[tuple[str, str], type[Exception]] = {}
_REMOTE_CLASSES_LOCK = threading.Lock()


def _message(exc: BaseException) -> str:
    return str(exc.args[0]) if exc.args else ""  # the model process's text as it was, whatever the builtin's __str__


def _remote_class(name: str, base: type[Exception]) -> type[Exception]:
    """A class named ``name`` derived from the builtin ``base`` (one per pair): the worker may not
    be able to import the model process's error type, but handlers of its builtin still catch it."""
    key = (name if name.isidentifier() else "RemoteError", base.__name__)
    with _REMOTE_CLASSES_LOCK:
        if key not in _REMOTE_CLASSES:
            _REMOTE_CLASSES[key] = type(key[0], (base,), {"__module__": __name__, "__str__": _message})
        return _REMOTE_CLASSES[key]


# -- the worker's connection -----------------------------------------------------------------------
@dataclass(eq=False)
class Pending:
    """A batch sent to the model process, until its reply arrives."""

    arrived: threading.Event = field(default_factory=threading.Event)
    outputs: Any = None
    error: dict[str, Any] | None = None

    def ready(self) -> bool:
        return self.arrived.is_set()

    def result(self) -> Any:
        while not self.arrived.wait(wait_s()):  # in steps: a deadline raised meanwhile is delivered
            pass
        if self.error is not None:
            raise raised(self.error)
        return self.outputs


class ModelClient:
    """A connection to the model process.  Batches are handed from any thread to one sender
    thread, which alone writes to the socket: a deadline raised in an item thread can then never
    cut a message short (which would garble every message after it).  One reader thread hands each
    reply to the batch it answers.  When the model process goes away, ``on_lost`` is called (a
    worker ends there), and every batch still waiting, or sent later, fails with
    :class:`ModelUnavailable`."""

    def __init__(self, address: str, token: str, on_lost: Callable[[], None] | None = None) -> None:
        self._on_lost = on_lost
        self._lost = False
        self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._socket.connect(address)
        self._stream: BinaryIO = SocketStream(self._socket)  # type: ignore[assignment]
        write_message(self._stream, {"hello": PROTOCOL, "token": token})
        header, _ = read_message(self._stream, max_size=0)
        if header.get("ready") != PROTOCOL:
            raise ModelUnavailable("model process", f"it refused this worker ({header.get('refused', header)})")
        self._guard = threading.Lock()
        self._pending: dict[int, Pending] = {}
        self._ids = itertools.count()
        self._devices: dict[str | None, str] = {}
        self._outbox: "queue.SimpleQueue[tuple[Any, ...]]" = queue.SimpleQueue()
        threading.Thread(target=self._read_replies, name="mmverify-model-replies", daemon=True).start()
        threading.Thread(target=self._send_batches, name="mmverify-model-batches", daemon=True).start()

    def computation(self, backend: Any, kind: Any) -> Compute:
        """``backend``'s computation ``kind``, run in the model process: launched when its batch is
        sent, finished when the reply is in."""
        identity = _identity(backend)
        return Staged(lambda batch: self.send(identity, kind, batch), Pending.result)

    def send(self, identity: dict[str, Any], kind: Any, batch: list[Any]) -> Pending:
        name, arrays = pack(kind)
        if arrays:
            raise TypeError(f"a computation is named by text and numbers, not arrays: {kind!r}")
        return self._post({**identity, "kind": name}, batch)

    def ask(self, question: str, value: Any = None, backend: Any = None) -> Any:
        """The model process's answer to ``question`` on ``value``: ``"device"``, the device it
        picks for a backend that requests ``value``; or a question about ``backend``, whose copy
        there is checked against this one's fingerprint, loaded, and asked
        (:meth:`~.base.Backend.answer`; ``"settings"``: what preparing inputs needs).  An error
        there is raised here, as a batch's would be."""
        header = {"ask": question} if backend is None else {**_identity(backend), "ask": question}
        return self._post(header, value).result()

    def device(self, requested: str | None) -> str:
        """The device the model process picks for a backend that requests ``requested`` (asked
        once per request): a served backend's, and so its fingerprint's, without torch here."""
        with self._guard:
            known = self._devices.get(requested)
        if known is None:
            known = str(self.ask("device", requested))
            with self._guard:
                self._devices[requested] = known
        return known

    def _post(self, header: dict[str, Any], value: Any) -> Pending:
        pending = Pending()
        with self._guard:
            if self._lost:
                raise ModelUnavailable("model process", GONE)
            ident = next(self._ids)
            self._pending[ident] = pending
        try:
            message = value_message({"id": ident, **header}, value, "batch")
        except BaseException:  # nothing was sent
            with self._guard:
                self._pending.pop(ident, None)
            raise
        self._outbox.put(message)  # one call: whole, or not at all
        return pending

    def waiting(self) -> bool:
        """Whether a batch sent is still unanswered."""
        with self._guard:
            return bool(self._pending)

    def _send_batches(self) -> None:
        try:
            while True:
                message = self._outbox.get()
                write_message(self._stream, *message)
        except Exception:  # noqa: BLE001  (the model process went away)
            self._gone()

    def _read_replies(self) -> None:
        try:
            while True:
                header, payload = read_message(self._stream)
                with self._guard:
                    pending = self._pending.pop(header["id"])
                if "error" in header:
                    pending.error = header["error"]
                else:
                    pending.outputs = received_value(header, payload, "outputs")
                pending.arrived.set()
        except Exception:  # noqa: BLE001  (the model process went away, or broke the protocol)
            self._gone()

    def _gone(self) -> None:
        if self._on_lost is not None:
            self._on_lost()
        with self._guard:
            self._lost = True
            waiting, self._pending = list(self._pending.values()), {}
        for pending in waiting:
            pending.error = {"type": "ModelUnavailable", "backend": "model process", "message": GONE}
            pending.arrived.set()


def _identity(backend: Any) -> dict[str, Any]:
    """What names a backend to the model process, which checks it against its own copy: a judge
    by a role it is configured for, any other backend by its capability."""
    identity = {"capability": backend.capability, "backend": backend.name, "fingerprint": backend.fingerprint}
    role = getattr(backend, "role", None)
    return identity if role is None else {**identity, "role": role}


def _end_worker() -> None:
    """In a worker: items waiting on a model process that went away would all become error rows;
    the worker ends instead, and the parent ends the run (see pipelines.model_process), which
    resumes where it stopped."""
    os._exit(MODEL_PROCESS_LOST)


_ADDRESS: tuple[str, str] | None = None  # (socket path, token) of this process's model process
# A connection per channel: "batches" carries the batches of the device threads' rounds and every
# backend's questions; "judge" a local judge's questions, whose generations (seconds each) the
# model process answers in order, so that batches never queue behind them.
CHANNELS = ("batches", "judge")
_CLIENTS: dict[str, ModelClient] = {}
_CLIENT_LOCK = threading.Lock()


def use_model_process(address: str, token: str) -> None:
    """Serve this process's servable backends from the model process at ``address`` (a worker's
    initializer calls this before any backend is made)."""
    global _ADDRESS
    _ADDRESS = (address, token)


def model_client(channel: str = "batches") -> ModelClient | None:
    """This process's connection to its model process for ``channel`` (see :data:`CHANNELS`),
    opened on first use; None when it has none.  A model process that cannot be reached ends the
    worker, as one that goes away does."""
    if channel not in CHANNELS:
        raise ValueError(f"no model process channel {channel!r}")
    if _ADDRESS is None:
        return None
    with _CLIENT_LOCK:
        if channel not in _CLIENTS:
            try:
                _CLIENTS[channel] = ModelClient(*_ADDRESS, on_lost=_end_worker)
            except (OSError, EOFError, ProtocolError, ModelUnavailable):
                _end_worker()
        return _CLIENTS[channel]


def waiting_on_model_process() -> bool:
    """Whether this process has sent its model process a batch that is still unanswered (a judge's
    question is not a batch: the model process drops one whose item's deadline has passed)."""
    with _CLIENT_LOCK:
        batches = _CLIENTS.get("batches")
    return batches is not None and batches.waiting()
