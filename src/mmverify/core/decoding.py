"""Who decodes media: the calling thread, or a pool of decoding processes.

Items scored together (:mod:`mmverify.pipelines.batch`) decode their media in their own threads.
Decoding holds the interpreter lock in many short stretches -- soundfile reads through Python
callbacks, resampling and image conversion are set up in Python -- and each stretch can delay the
thread that runs the model batches: every kernel launch there gives the lock up and has to win it
back.  A :class:`DecodePool` decodes in worker processes instead, so an item thread only waits for
its arrays.  A worker runs the same functions of :mod:`.media` on the same bytes, so the arrays,
and the rows scored from them, are the same.

Each worker decodes one input at a time, so what happens to it belongs to that input:

* a worker that dies while decoding (a crash inside a native decoder, a kill for memory) makes
  its input a :class:`~.media.MediaError` of reason ``media_undecodable``; the pool starts another;
* a thread that gives up waiting (its item's deadline) ends its worker, which stops a runaway decode;
* an input the decoder refuses is the same :class:`~.media.MediaError` as in the calling thread;
  any other failure there is a ``RuntimeError`` naming the original exception.

Workers are started with ``python -m mmverify.core.decoding`` and speak a small framed protocol on
their standard input and output (a JSON header, then raw bytes), so nothing is unpickled and the
caller's main module is never imported again (as :mod:`multiprocessing` would).  Unix only.
"""

from __future__ import annotations

import json
import os
import queue
import select
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, BinaryIO, Protocol

import numpy as np

try:
    import fcntl
except ImportError:  # not a Unix system: a DecodePool refuses to start there
    fcntl = None  # type: ignore[assignment]

from .media import DEFAULT_LIMITS, MediaError, MediaLimits, MediaReason, MediaSource, load_audio, load_image

__all__ = ["DecodePool", "Decoder", "INLINE", "InlineDecoder"]

_POLL_S = 0.05  # how often a waiting thread wakes, so a deadline raised in it is delivered
_HEADER = 4  # bytes of a message's header length (big-endian)
_PIPE_BYTES = 1 << 20  # the default most an unprivileged process may ask for


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


# -- the protocol: a header length, a JSON header, then ``header["size"]`` bytes ---------------------
def _write(stream: BinaryIO, header: dict[str, Any], payload: bytes | memoryview = b"") -> None:
    encoded = json.dumps({**header, "size": len(payload)}).encode()
    for data in (memoryview(len(encoded).to_bytes(_HEADER, "big") + encoded), memoryview(payload)):
        while data:
            written = stream.write(data)  # an unbuffered pipe may take part of it
            data = data[written if written is not None else len(data) :]
    stream.flush()


def _read_exactly(stream: BinaryIO, size: int) -> bytearray:
    data = bytearray(size)  # writable: arrays are made on it without a copy
    view, got = memoryview(data), 0
    while got < size:
        count = stream.readinto(view[got:])  # type: ignore[attr-defined]  (an unbuffered pipe may give part)
        if not count:
            raise EOFError("the other end closed its pipe")
        got += count
    return data


def _read(stream: BinaryIO) -> tuple[dict[str, Any], bytearray]:
    header = json.loads(_read_exactly(stream, int.from_bytes(_read_exactly(stream, _HEADER), "big")))
    return header, _read_exactly(stream, header["size"])


def _request(kind: str, source: MediaSource, sample_rate: int | None, limits: MediaLimits) -> tuple[dict[str, Any], bytes]:
    header: dict[str, Any] = {"kind": kind, "rate": sample_rate, "limits": vars(limits)}
    if isinstance(source, bytes):
        return header, source
    # the path as given, read from this process's working folder: messages name it as here
    return {**header, "path": os.fsdecode(source), "cwd": os.getcwd()}, b""


def _serve(requests: BinaryIO, replies: BinaryIO) -> None:
    """A worker's loop: decode each request until the input closes."""
    try:
        _write(replies, {"ready": True})
        while True:
            _answer(*_read(requests), replies)
    except (EOFError, BrokenPipeError):
        return  # the caller closed its end, or went away


def _answer(header: dict[str, Any], payload: bytearray, replies: BinaryIO) -> None:
    if "cwd" in header and header["cwd"] != os.getcwd():
        os.chdir(header["cwd"])
    source: MediaSource = header["path"] if "path" in header else bytes(payload)
    limits = MediaLimits(**header["limits"])
    try:
        if header["kind"] == "image":
            array, rate = load_image(source, limits), None
        else:
            array, rate = load_audio(source, header["rate"], limits)
    except MediaError as exc:
        _write(replies, {"media_error": [exc.reason, exc.message]})
    except Exception as exc:  # noqa: BLE001  (reported to the caller, which raises it)
        _write(replies, {"error": f"{type(exc).__name__}: {exc}"})
    else:
        array = np.ascontiguousarray(array)
        _write(replies, {"dtype": array.dtype.str, "shape": list(array.shape), "rate": rate}, memoryview(array).cast("B"))


# -- the caller's side -------------------------------------------------------------------------------
def _widen(pipe: Any) -> None:
    """Let a reply of a few seconds of audio sit in the pipe whole, so it is read in one call (each
    call gives the interpreter lock up and must win it back); Linux only, and only as far as allowed."""
    if fcntl is None or not hasattr(fcntl, "F_SETPIPE_SZ"):
        return
    for size in (_PIPE_BYTES, _PIPE_BYTES // 4):
        try:
            fcntl.fcntl(pipe.fileno(), fcntl.F_SETPIPE_SZ, size)
            return
        except OSError:
            continue


class _Worker:
    def __init__(self) -> None:
        package_root = str(Path(__file__).resolve().parents[2])  # so a source tree on sys.path works too
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")])))
        self.process = subprocess.Popen(  # unbuffered: select() sees every byte not yet read
            [sys.executable, "-m", "mmverify.core.decoding"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, bufsize=0
        )
        self.ready = False
        _widen(self.process.stdout)

    def call(self, header: dict[str, Any], payload: bytes) -> tuple[dict[str, Any], bytearray]:
        """Send a request and read its reply (the ready message first, once)."""
        assert self.process.stdin is not None and self.process.stdout is not None
        if not self.ready:
            self._reply()
            self.ready = True
        _write(self.process.stdin, header, payload)
        return self._reply()

    def _reply(self) -> tuple[dict[str, Any], bytearray]:
        stdout = self.process.stdout
        assert stdout is not None
        while not select.select([stdout], [], [], _POLL_S)[0]:
            pass  # a deadline raised in this thread is delivered between these waits
        return _read(stdout)

    def end(self, exiting: bool = False) -> str:
        """Stop the process whatever it is doing; how it ended, when it was ``exiting`` by itself
        (its pipe closed)."""
        ended = "killed"
        if exiting:
            try:
                code = self.process.wait(timeout=_POLL_S)
                ended = f"signal {-code}" if code < 0 else f"exit status {code}"
            except subprocess.TimeoutExpired:
                ended = "no exit status"
        self.process.kill()
        self.process.wait()
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass
        return ended


class DecodePool:
    """Decodes in up to ``processes`` worker processes, started as they are needed; :meth:`close`
    ends them.  A pickled pool is unpickled without workers, with its number of processes."""

    def __init__(self, processes: int) -> None:
        if processes < 1:
            raise ValueError("a decode pool needs at least 1 process")
        if os.name == "nt":
            raise RuntimeError("decoding processes need a Unix system (their pipes are waited on with select)")
        self.processes = processes
        self._lock = threading.Lock()
        self._idle: queue.SimpleQueue[_Worker] = queue.SimpleQueue()
        self._workers: set[_Worker] = set()
        self._closed = False

    def image(self, source: MediaSource, limits: MediaLimits = DEFAULT_LIMITS) -> np.ndarray:
        array, _ = self._decode(*_request("image", source, None, limits))
        return array

    def audio(
        self, source: MediaSource, sample_rate: int | None = None, limits: MediaLimits = DEFAULT_LIMITS
    ) -> tuple[np.ndarray, int]:
        return self._decode(*_request("audio", source, sample_rate, limits))

    def close(self) -> None:
        """End every worker; decodes still running raise RuntimeError, and so do later calls."""
        with self._lock:
            self._closed = True
            workers, self._workers = self._workers, set()
        for worker in workers:
            worker.end()

    def __enter__(self) -> "DecodePool":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        for worker in getattr(self, "_workers", ()):
            worker.process.kill()
            worker.process.wait()

    def __getstate__(self) -> dict[str, int]:
        return {"processes": self.processes}

    def __setstate__(self, state: dict[str, int]) -> None:
        self.__init__(state["processes"])  # type: ignore[misc]

    def _take(self) -> _Worker:
        """An idle worker, a new one while there are fewer than ``processes``, else the next freed."""
        while True:
            with self._lock:
                if self._closed:
                    raise RuntimeError("this decode pool is closed")
                try:
                    return self._idle.get_nowait()
                except queue.Empty:
                    pass
                if len(self._workers) < self.processes:
                    worker = _Worker()
                    self._workers.add(worker)
                    return worker
            try:
                worker = self._idle.get(timeout=_POLL_S)
            except queue.Empty:
                continue
            if self._closed:  # freed by a decode that finished as the pool closed
                raise RuntimeError("this decode pool is closed")
            return worker

    def _drop(self, worker: _Worker, exiting: bool = False) -> str:
        with self._lock:
            self._workers.discard(worker)
        return worker.end(exiting)

    def _decode(self, header: dict[str, Any], payload: bytes) -> Any:
        worker = self._take()
        try:
            reply, data = worker.call(header, payload)
        except (EOFError, BrokenPipeError):
            ended = self._drop(worker, exiting=True)
            if self._closed:
                raise RuntimeError("this decode pool was closed while decoding") from None
            if not worker.ready:
                raise RuntimeError(f"a decoding process failed to start ({ended})") from None
            raise MediaError(
                MediaReason.UNDECODABLE, f"decoding ended its process ({ended}: a crash in the decoder, or a kill for memory)"
            ) from None
        except BaseException:  # a deadline or an interrupt: the worker may still be decoding
            self._drop(worker)
            raise
        self._idle.put(worker)
        if "media_error" in reply:
            raise MediaError(*reply["media_error"])
        if "error" in reply:
            raise RuntimeError(f"decoding failed in its process: {reply['error']}")
        array = np.frombuffer(data, dtype=np.dtype(reply["dtype"])).reshape(reply["shape"])
        return array, reply["rate"]


def _main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when to stop
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # whatever a library prints goes to stderr, not into the replies
    _serve(sys.stdin.buffer, replies)


if __name__ == "__main__":
    _main()
