"""Who decodes media: the calling thread, or a pool of decoding processes.

Items scored together (:mod:`mmverify.pipelines.batch`) decode their media in their own threads.
Decoding holds the interpreter lock in many short stretches -- soundfile reads through Python
callbacks, resampling and image conversion are set up in Python -- and each stretch can delay the
thread that runs the model batches: every kernel launch there gives the lock up and has to win it
back.  A :class:`DecodePool` decodes in worker processes instead, so an item thread only waits for
its arrays.  A worker runs the same functions of :mod:`.media` on the same bytes, so the arrays,
and the rows scored from them, are the same.

Each worker process belongs to one dispatcher thread of the pool, which hands it one request at a
time; item threads only queue requests and wait for the answers.  A deadline raised in an item
thread therefore never strands a worker, and what happens to a worker belongs to its request:

* a worker that dies while decoding -- a crash inside a native decoder, a kill for memory --
  makes its input a :class:`~.media.MediaError` of reason ``media_undecodable``; one stopped by a
  termination signal (a service shutting down) is a ``RuntimeError``, not the input's fault;
* a worker found dead between requests is replaced before the next one;
* a request whose item gave up waiting (its deadline) ends its worker, which stops a runaway decode;
* an input the decoder refuses is the same :class:`~.media.MediaError` as in the calling thread,
  an out-of-memory failure a ``MemoryError``; anything else a ``RuntimeError`` naming it.

Workers run :mod:`.decode_worker` (JSON headers and raw bytes: nothing is unpickled), started from
a fixed command, so the caller's main module is never imported again, as :mod:`multiprocessing`
would.  A pool copied into a forked child starts its own workers there.  Unix only.
"""

from __future__ import annotations

import os
import queue
import selectors
import signal
import subprocess
import sys
import threading
import weakref
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from .decode_worker import BOOTSTRAP, READY, ProtocolError, read_message, write_message
from .media import DEFAULT_LIMITS, MediaError, MediaLimits, MediaReason, MediaSource, load_audio, load_image

try:
    import fcntl
except ImportError:  # not a Unix system: a DecodePool refuses to start there
    fcntl = None  # type: ignore[assignment]

__all__ = ["DecodePool", "Decoder", "INLINE", "InlineDecoder"]

_POLL_S = 0.05  # how often a waiting thread wakes: a deadline raised in it is delivered, a dispatcher sees it
_PIPE_BYTES = 1 << 20  # a reply pipe this wide holds a few seconds of audio whole: read in one call
_STOPPED = {signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT}  # endings that are not the input's fault


class Decoder(Protocol):
    """Turns media sources into arrays, as :func:`~.media.load_image` and :func:`~.media.load_audio` do."""

    def image(self, source: MediaSource, limits: MediaLimits = DEFAULT_LIMITS) -> np.ndarray: ...

    def audio(
        self, source: MediaSource, sample_rate: int | None = None, limits: MediaLimits = DEFAULT_LIMITS
    ) -> tuple[np.ndarray, int]: ...


class InlineDecoder:
    """Decodes in the calling thread."""

    def image(self, source: MediaSource, limits: MediaLimits = DEFAULT_LIMITS) -> np.ndarray:
        return load_image(source, limits)

    def audio(
        self, source: MediaSource, sample_rate: int | None = None, limits: MediaLimits = DEFAULT_LIMITS
    ) -> tuple[np.ndarray, int]:
        return load_audio(source, sample_rate, limits)


INLINE = InlineDecoder()


class _Request:
    def __init__(self, kind: str, source: MediaSource, sample_rate: int | None, limits: MediaLimits) -> None:
        self.header: dict[str, Any] = {"kind": kind, "rate": sample_rate, "limits": vars(limits)}
        self.payload = b""
        if isinstance(source, bytes):
            self.payload = source
        else:
            path = os.fsdecode(source)
            self.header["path"] = path  # as given: messages name it as decoding here would
            if not os.path.isabs(path):
                self.header["cwd"] = os.getcwd()  # read from this process's working folder
        self.result: tuple[np.ndarray, int | None] | None = None
        self.error: BaseException | None = None
        self.abandoned = False  # its item stopped waiting
        # a plain lock, held until answered: a deadline landing in the waiting thread cannot leave it taken
        self.answered = threading.Lock()
        self.answered.acquire()

    def answer(self, result: tuple[np.ndarray, int | None] | None = None, error: BaseException | None = None) -> None:
        self.result, self.error = result, error
        self.answered.release()


class _Worker:
    """One decoding process, its request pipe (its standard input) and its reply pipe."""

    def __init__(self) -> None:
        package_root = str(Path(__file__).resolve().parents[2])
        reply_read, reply_write = os.pipe()
        try:
            if fcntl is not None and hasattr(fcntl, "F_SETPIPE_SZ"):
                try:
                    fcntl.fcntl(reply_read, fcntl.F_SETPIPE_SZ, _PIPE_BYTES)
                except OSError:
                    pass  # over the system's limit: replies take a few reads
            self.process = subprocess.Popen(
                [sys.executable, "-c", BOOTSTRAP, str(reply_write), package_root], stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL, pass_fds=(reply_write,), start_new_session=True,  # a group's signals are the caller's
            )  # fmt: skip
        except BaseException:
            os.close(reply_read)
            raise
        finally:
            os.close(reply_write)
        self.replies = os.fdopen(reply_read, "rb", buffering=0)
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.replies, selectors.EVENT_READ)
        self.ready = False

    def reply(self, request: _Request | None, shared: "_Shared") -> tuple[dict[str, Any], bytearray] | None:
        """The next message; None when ``request`` was given up or the pool closed meanwhile."""
        while not self.selector.select(_POLL_S):
            if shared.closed or (request is not None and request.abandoned):
                return None
        return read_message(self.replies)

    def ended(self) -> int:
        """The exit status of a process whose pipe closed (it is exiting)."""
        try:
            return self.process.wait(timeout=5.0)
        except subprocess.TimeoutExpired:
            self.end()
            return -signal.SIGKILL

    def end(self) -> None:
        self.process.kill()
        self.process.wait()
        for stream in (self.process.stdin, self.replies):
            try:
                stream.close()  # type: ignore[union-attr]
            except (OSError, AttributeError):
                pass
        self.selector.close()


class _Shared:
    """What the pool and its dispatcher threads share (the threads hold no reference to the pool,
    so a dropped pool is collected, and its finalizer stops them)."""

    def __init__(self, processes: int) -> None:
        self.requests: queue.SimpleQueue[_Request | None] = queue.SimpleQueue()
        self.closed = False
        self.dispatchers = [_Dispatcher(self) for _ in range(processes)]

    def shutdown(self) -> None:
        self.closed = True
        for _ in self.dispatchers:
            self.requests.put(None)


class _Dispatcher(threading.Thread):
    """Hands one worker process one request at a time."""

    def __init__(self, shared: _Shared) -> None:
        super().__init__(name="mmverify-decoding", daemon=True)
        self.shared = shared
        self.worker: _Worker | None = None

    def run(self) -> None:
        try:
            while True:
                request = self.shared.requests.get()
                if request is None:
                    return
                if self.shared.closed:
                    request.answer(error=RuntimeError("this decode pool is closed"))
                elif not request.abandoned:
                    self._serve(request)
        finally:
            self._retire()

    def _retire(self) -> None:
        if self.worker is not None:
            self.worker.end()
            self.worker = None

    def _serve(self, request: _Request) -> None:
        try:
            result = self._decode(request)
        except BaseException as exc:  # noqa: BLE001  (every request gets its answer)
            request.answer(error=exc)
        else:
            request.answer(result)

    def _live_worker(self) -> _Worker:
        """This dispatcher's worker, started (or replaced, when it died between requests) and ready."""
        worker = self.worker
        if worker is not None and worker.process.poll() is None:
            return worker
        self._retire()
        worker = self.worker = _Worker()
        try:
            message = worker.reply(None, self.shared)
            problem = "the pool closed" if message is None else None if message[0].get("ready") == READY else "no ready message"
        except (EOFError, ProtocolError):
            problem = _ending(worker.ended())
        if problem is not None:
            self._retire()
            raise RuntimeError(f"a decoding process failed to start ({problem})")
        return worker

    def _decode(self, request: _Request) -> tuple[np.ndarray, int | None]:
        worker = self._live_worker()
        if request.abandoned:  # while its worker started: nothing to stop
            raise RuntimeError("the decode was given up")
        try:
            try:
                write_message(worker.process.stdin, request.header, request.payload)  # type: ignore[arg-type]
            except BrokenPipeError:  # died before reading the request: not this input's doing
                self._retire()
                worker = self._live_worker()
                write_message(worker.process.stdin, request.header, request.payload)  # type: ignore[arg-type]
            message = worker.reply(request, self.shared)
        except (EOFError, BrokenPipeError, ProtocolError):
            raise self._death(worker) from None
        if message is None:  # given up, or the pool closed: the decode cannot be stopped but by its process
            self._retire()
            raise RuntimeError("the decode was given up")
        return _result(*message)

    def _death(self, worker: _Worker) -> BaseException:
        code = worker.ended()
        self._retire()
        if self.shared.closed:
            return RuntimeError("this decode pool was closed while decoding")
        if code < 0 and -code in _STOPPED:
            return RuntimeError(f"a decoding process was stopped ({_ending(code)})")
        return MediaError(MediaReason.UNDECODABLE, f"decoding ended its process ({_ending(code)}: a crash in the decoder, or a kill for memory)")


def _ending(code: int) -> str:
    return f"signal {-code}" if code < 0 else f"exit status {code}"


def _result(header: dict[str, Any], data: bytearray) -> tuple[np.ndarray, int | None]:
    if "media_error" in header:
        raise MediaError(*header["media_error"])
    if header.get("out_of_memory"):
        raise MemoryError()
    if "error" in header:
        raise RuntimeError(f"decoding failed in its process: {header['error']}")
    array = np.frombuffer(data, dtype=np.dtype(header["dtype"])).reshape(header["shape"])
    array.flags.writeable = bool(header["writeable"])  # as decoding here would leave it
    return array, header["rate"]


class DecodePool:
    """Decodes in up to ``processes`` worker processes, started as requests need them;
    :meth:`close` ends them (so does dropping the pool).  A pickled pool is unpickled without
    workers, with its number of processes; so is one inherited by a forked child, on first use."""

    def __init__(self, processes: int) -> None:
        if processes < 1:
            raise ValueError("a decode pool needs at least 1 process")
        if os.name == "nt":
            raise RuntimeError("decoding processes need a Unix system")
        self.processes = processes
        self._lock = threading.Lock()
        self._shared: _Shared | None = None
        self._pid = os.getpid()
        self._closed = False

    def image(self, source: MediaSource, limits: MediaLimits = DEFAULT_LIMITS) -> np.ndarray:
        array, _ = self._decode(_Request("image", source, None, limits))
        return array

    def audio(
        self, source: MediaSource, sample_rate: int | None = None, limits: MediaLimits = DEFAULT_LIMITS
    ) -> tuple[np.ndarray, int]:
        return self._decode(_Request("audio", source, sample_rate, limits))  # type: ignore[return-value]

    def close(self) -> None:
        """End every worker; decodes still running, and later calls, raise RuntimeError."""
        with self._lock:
            self._closed = True
            shared, self._shared = self._shared, None
        if shared is not None and self._pid == os.getpid():
            shared.shutdown()
            for dispatcher in shared.dispatchers:
                dispatcher.join()

    def __enter__(self) -> "DecodePool":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getstate__(self) -> dict[str, int]:
        return {"processes": self.processes}

    def __setstate__(self, state: dict[str, int]) -> None:
        self.__init__(state["processes"])  # type: ignore[misc]

    def _started(self) -> _Shared:
        with self._lock:
            if self._closed:
                raise RuntimeError("this decode pool is closed")
            if self._pid != os.getpid():  # a forked copy: the parent's workers and threads are not ours
                self._shared, self._pid = None, os.getpid()
            if self._shared is None:
                shared = self._shared = _Shared(self.processes)
                for dispatcher in shared.dispatchers:
                    dispatcher.start()
                weakref.finalize(self, shared.shutdown)
            return self._shared

    def _decode(self, request: _Request) -> tuple[np.ndarray, int | None]:
        shared = self._started()
        try:
            shared.requests.put(request)
            while not request.answered.acquire(timeout=_POLL_S):  # a deadline raised here is delivered between waits
                if shared.closed and not any(dispatcher.is_alive() for dispatcher in shared.dispatchers):
                    raise RuntimeError("this decode pool is closed")  # queued as it closed: nobody will answer
        except BaseException:
            request.abandoned = True  # its dispatcher ends the worker rather than finish the decode
            raise
        if request.error is not None:
            raise request.error
        assert request.result is not None
        return request.result
