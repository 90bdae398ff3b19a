"""The model process of ``mmverify score --workers N --model-process``: one process holds the
servable models and computes the batches every worker sends (:mod:`mmverify.models.served` is
the workers' side).

The parent starts it before the workers, with the run's scoring context, a Unix socket in a
folder of its own (mode 0700) and a token; it accepts a connection from each worker that shows
the token.  For each connection one thread reads batches and launches each on the device under
its backend's lock -- launches of several workers interleave there, and a batch is launched while
the one before is still computing -- and a second thread waits for each launched batch and sends
its outputs back, in order.  A batch that raises is answered with the error's type and message;
the worker's round then runs its requests again one by one, as it does with a local model, so a
bad input fails only its own item.

The parent names what the run's tasks need (hub capabilities and judges) as it first meets them
(:meth:`ModelProcess.preload`); a servable model, a local judge among them, is loaded at once, in a
thread of its own, while the workers start, rather than when the first batch or question arrives.
A load that fails is left for the batches to meet and report.

The process ends when the parent closes its lifeline (whatever way the parent ends).  When it
ends first, the workers end too, and the parent ends the run with :class:`ModelProcessEnded`:
rows already written stay, and a run started again resumes.
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import secrets
import shutil
import signal
import socket
import tempfile
import threading
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterable, Iterator

from ..core.decode_worker import KeptBuffers, ProtocolError, SocketStream, read_message, write_message
from ..core.exits import freeze_for_exit
from ..models.base import ModelUnavailable, pick_device
from ..models.compute_locks import computing
from ..models.hub import get_hub
from ..models.rows import Staged
from ..models.batching import MAX_STARTED
from ..models.served import PROTOCOL, error_reply, received_value, unpack, use_model_process, value_message
from ..tasks.catalog import CATALOG, TASK_REGISTRY, judge_role
from .context import ScoringContext, install_context
from .execute import Planned
from .plan import WorkItem

START_TIMEOUT_S = 300.0  # importing the package and binding the socket; models load on first use


class ModelProcessEnded(RuntimeError):
    """The model process ended before the run did."""


class _Backends:
    """The backends this process serves, each checked once against what the worker computes with,
    and each with its slots: at most :data:`MAX_STARTED` of its batches launched and not yet
    finished at a time, whichever workers sent them (as in one process's round), so that the
    device's queue and memory stay those of one process."""

    def __init__(self) -> None:
        self._checked: dict[tuple[str, str, str], tuple[Any, threading.Semaphore]] = {}
        self._lock = threading.Lock()

    def get(self, header: dict[str, Any]) -> tuple[Any, threading.Semaphore]:
        role = header.get("role")
        key = (header["capability"] if role is None else f"judge:{role}", header["backend"], header["fingerprint"])
        with self._lock:
            if key in self._checked:
                return self._checked[key]
        backend = get_hub().backend(header["capability"]) if role is None else get_hub().judge(str(role))
        if backend.name != header["backend"] or backend.fingerprint != header["fingerprint"]:
            raise ModelUnavailable(header["backend"], (
                f"the model process computes {header['capability']} with {backend.name} ({backend.fingerprint}), "
                f"not with {header['fingerprint']}"
            ))  # fmt: skip
        with self._lock:
            return self._checked.setdefault(key, (backend, self._slots_of(backend)))

    def _slots_of(self, backend: Any) -> threading.Semaphore:
        """The slots of ``backend`` (lock held): one set per backend, under whatever key it was asked."""
        for known, slots in self._checked.values():
            if known is backend:
                return slots
        return threading.Semaphore(MAX_STARTED)


@dataclass
class _Launched:
    """A batch read from a worker: launched (``finish`` set), computed, or failed."""

    ident: int
    finish: Callable[[Any], Any] | None = None
    handle: Any = None  # the launch's handle, or the outputs
    slots: threading.Semaphore | None = None  # released once the batch is finished
    error: Exception | None = None


def _launch(backends: _Backends, header: dict[str, Any], payload: Any) -> _Launched:
    """The batch launched (a staged computation, once one of its backend's slots is free) or
    computed; or a worker's question answered (see :meth:`~mmverify.models.served.ModelClient.ask`)."""
    if "ask" in header:
        return _Launched(header["id"], handle=_answer_question(backends, header, payload))
    backend, slots = backends.get(header)
    compute = backend.computation(unpack(header["kind"], []))
    batch = received_value(header, payload, "batch")
    slots.acquire()
    try:
        with computing(backend):
            if isinstance(compute, Staged):
                return _Launched(header["id"], compute.finish, compute.launch(batch), slots)
            outputs = compute(batch)
    except BaseException:
        slots.release()
        raise
    slots.release()
    return _Launched(header["id"], handle=outputs)


def _answer_question(backends: _Backends, header: dict[str, Any], payload: Any) -> Any:
    if header["ask"] == "device":
        return pick_device(received_value(header, payload, "batch"))
    backend, _ = backends.get(header)
    backend.ensure_loaded()
    return backend.answer(header["ask"], received_value(header, payload, "batch"))


def _answer(replies: "queue.Queue[_Launched | None]", connection: socket.socket) -> None:
    """Send each batch's outputs (or error) back, in the order the batches came, then close the
    connection: a worker that stopped sending still gets the replies of what it sent, and no reply
    can go to a descriptor the system has given to another worker's connection since.  Once the
    worker is gone, its launched batches are still finished, unsent, so that their backend's slots
    come back."""
    stream: BinaryIO = SocketStream(connection)  # type: ignore[assignment]
    connected = True
    while True:
        batch = replies.get()
        if batch is None:
            connection.close()
            return
        try:
            if batch.error is not None:
                raise batch.error
            outputs = batch.finish(batch.handle) if batch.finish is not None else batch.handle
            message = value_message({"id": batch.ident}, outputs, "outputs")
        except Exception as exc:  # noqa: BLE001  (reported to the worker, whose round retries alone)
            message = ({"id": batch.ident, "error": error_reply(exc), "arrays": []},)
        finally:
            if batch.slots is not None:
                batch.slots.release()
        try:
            if connected:
                write_message(stream, *message)
        except (OSError, ValueError):  # the worker went away
            connected = False


def serve_connection(connection: socket.socket, token: str, backends: _Backends) -> None:
    """Answer one worker until it closes its end."""
    stream: BinaryIO = SocketStream(connection)  # type: ignore[assignment]
    replies: "queue.Queue[_Launched | None]" = queue.Queue()
    answering = False
    try:
        hello, _ = read_message(stream, max_size=0)  # a hello carries nothing: no one makes this process allocate
        if hello.get("hello") != PROTOCOL or not secrets.compare_digest(str(hello.get("token", "")), token):
            write_message(stream, {"refused": "wrong protocol or token"})
            return
        write_message(stream, {"ready": PROTOCOL})
        # the only writer from now, and the one to close the connection; threads are named for
        # profiles (benchmarks/gil_summary.py)
        threading.Thread(target=_answer, args=(replies, connection), name="mmverify-model-answer", daemon=True).start()
        answering = True
        buffers = KeptBuffers()
        while True:
            header, payload = read_message(stream, payload=buffers.take)
            if not isinstance(header.get("id"), int):  # no reply could name what it answers
                raise ProtocolError("a message without its id")
            try:
                replies.put(_launch(backends, header, payload))
            except Exception as exc:  # noqa: BLE001
                replies.put(_Launched(header["id"], error=exc))
            del payload  # its buffer can take the next batch once the launch has let go of it
    except (EOFError, OSError, ProtocolError):
        pass
    finally:
        replies.put(None)
        if not answering:
            connection.close()


def preload(needs: list[str]) -> None:
    """Load what this process serves of ``needs`` (a task's: hub capabilities, and judges as
    ``judge`` or ``judge:ROLE``) with its hub, one after another; an endpoint judge loads nothing.
    Failures are dropped: the first batch or question that needs the model meets the same one and
    reports it."""
    for need in needs:
        try:
            role = judge_role(need)
            if role is not None:
                judge = get_hub().judge(role)
                if getattr(judge, "servable", False):
                    judge.ensure_loaded()
            elif get_hub().instance(need).servable:
                get_hub().backend(need)
        except Exception:  # noqa: BLE001
            pass


def _watch_lifeline(lifeline: Any, listener: socket.socket) -> None:
    """Hand each list of needs the parent sends to a loading thread, and end this process
    once the parent is gone (its end of the lifeline closes): the listener is shut, so that the main
    thread returns and the process exits as usual."""
    loads: "queue.SimpleQueue[list[str]]" = queue.SimpleQueue()
    threading.Thread(target=_load_each, args=(loads,), name="mmverify-model-preload", daemon=True).start()
    try:
        while True:
            loads.put(lifeline.recv())
    except (EOFError, OSError):
        pass
    try:
        listener.shutdown(socket.SHUT_RDWR)
    except OSError:  # a system where a listening socket cannot be shut: end here
        os._exit(0)


def _load_each(loads: "queue.SimpleQueue[list[str]]") -> None:
    """Preload each need once (a kept pool names its tasks' needs on every run)."""
    asked: set[str] = set()
    while True:
        needs = [need for need in loads.get() if need not in asked]
        asked.update(needs)
        preload(needs)


def model_process_main(address: str, token: str, context: ScoringContext, ready: Any, lifeline: Any) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when to stop
    install_context(context)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(address)
    listener.listen(64)
    ready.send(True)
    ready.close()
    threading.Thread(target=_watch_lifeline, args=(lifeline, listener), daemon=True).start()
    serve(listener, token)
    shutil.rmtree(Path(address).parent, ignore_errors=True)  # the parent's stop does too, unless it was killed
    freeze_for_exit()  # the parent's stop waits for this process's end


def serve(listener: socket.socket, token: str) -> None:
    """Answer every worker that connects to ``listener`` until it is shut, with this process's hub."""
    backends = _Backends()
    while True:
        try:
            connection, _ = listener.accept()
        except OSError:  # shut (by the lifeline's watcher)
            return
        threading.Thread(
            target=serve_connection, args=(connection, token, backends), name="mmverify-model-reader", daemon=True
        ).start()


def announced(planned: Iterable[Planned], preload: Callable[[list[str]], None]) -> Iterator[Planned]:
    """``planned`` as it comes, with ``preload`` given the needs of each task (models and judges)
    the first time one of its items passes (the pool reads ahead of its workers, so the models load
    while the workers start)."""
    seen: set[str] = set()
    for entry in planned:
        if isinstance(entry, WorkItem) and entry.task not in seen:
            seen.add(entry.task)
            needs = task_needs(entry.task)
            if needs:
                preload(needs)
        yield entry


def task_needs(task_id: str) -> list[str]:
    """The model capabilities of ``task_id`` and its judges, as ``judge:ROLE`` for each role the
    task asks (the catalog's ``judge`` stands for them all: OCR tasks ask ``ocr`` and
    ``ocr_second``)."""
    info = CATALOG.get(task_id)
    if info is None or not info.needs:
        return []
    judged = any(judge_role(need) is not None for need in info.needs)
    roles = getattr(TASK_REGISTRY.get(task_id), "roles", ()) if judged and info.implemented else ()
    return [*info.capabilities, *(f"judge:{role}" for role in roles)]


def served_worker(address: str, token: str, initializer: Any, initargs: tuple[Any, ...]) -> None:
    """A worker's initializer under a model process: its servable backends compute there."""
    use_model_process(address, token)
    if initializer is not None:
        initializer(*initargs)


class ModelProcess:
    """The parent's handle on a model process: started at once, stopped by :meth:`stop`."""

    def __init__(self, context: ScoringContext) -> None:
        spawn = multiprocessing.get_context("spawn")
        self._folder = Path(tempfile.mkdtemp(prefix="mmverify-models-"))  # mode 0700: this user only
        # removed however this process ends: at its exit, daemonic children are ended by a signal
        self._remove_folder = weakref.finalize(self, shutil.rmtree, str(self._folder), True)
        self.address = str(self._folder / "models.sock")
        self.token = secrets.token_hex(16)
        ready, ready_child = spawn.Pipe(duplex=False)
        # the child reads the needs to load, and EOF once the parent is gone
        lifeline_child, self._lifeline = spawn.Pipe(duplex=False)
        self.process = spawn.Process(
            target=model_process_main, args=(self.address, self.token, context, ready_child, lifeline_child),
            name="mmverify-models", daemon=True,
        )  # fmt: skip
        try:
            self.process.start()
        except BaseException:
            self._remove_folder()
            raise
        ready_child.close()
        lifeline_child.close()
        try:
            if not ready.poll(START_TIMEOUT_S) or not ready.recv():
                raise ModelProcessEnded(f"the model process did not start (exit code {self.process.exitcode})")
        except (EOFError, OSError):
            self.stop()
            raise ModelProcessEnded(f"the model process did not start (exit code {self.process.exitcode})") from None
        except ModelProcessEnded:
            self.stop()
            raise
        finally:
            ready.close()

    def preload(self, needs: list[str]) -> None:
        """Have the model process load what it serves of ``needs`` now (see the module)."""
        try:
            self._lifeline.send(list(needs))
        except (OSError, ValueError):  # ended, or stopped: the run learns it from its workers
            pass

    def ended(self, wait_s: float = 0.0) -> bool:
        """Whether the process has ended (waiting up to ``wait_s`` seconds for it to)."""
        self.process.join(wait_s)
        return not self.process.is_alive()

    def stop(self) -> None:
        self._lifeline.close()
        self.process.join(5)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(5)
        self._remove_folder()
