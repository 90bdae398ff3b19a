"""Who decodes media: the calling thread, or a pool of decoding processes.

Items scored together (:mod:`mmverify.pipelines.batch`) decode their media in their own threads.
Decoding holds the interpreter lock in many short stretches -- soundfile reads bytes through Python
callbacks, resampling and image conversion are set up in Python -- and each stretch can delay the
thread that runs the model batches: every kernel launch there gives the lock up and has to win it
back.  A :class:`DecodePool` decodes in worker processes instead, so an item thread only waits for
its arrays.  A worker runs the same functions of :mod:`.media` on the same bytes, so the arrays,
and the rows scored from them, are the same.  A task that will resample the whole clip (CLAP's
whole-clip tasks: 22.05 to 48 kHz, the largest step of their host work) asks for it with the
clip (:meth:`Decoder.clip`), and the worker resamples it too; parts of a clip go to a worker to be
resampled (:meth:`Decoder.resample`), and come back as resampling them here makes them.

Each worker decodes one input at a time, for the thread that took it; the thread writes the
request and reads the reply itself (handing that work to another thread would cost the lock more
hand-offs).  What happens to a worker belongs to its input:

* a worker that dies while decoding -- a crash inside a native decoder, a kill for memory --
  makes its input a :class:`~.media.MediaError` of reason ``media_undecodable``; one stopped by a
  termination signal (a service shutting down) is a ``RuntimeError``, not the input's fault;
* a worker found dead between inputs is replaced before the next one;
* a thread that gives up waiting (its item's deadline) ends its worker, which stops a runaway decode;
* an input the decoder refuses is the same :class:`~.media.MediaError` as in the calling thread,
  an out-of-memory failure a ``MemoryError``; anything else a ``RuntimeError`` naming it.

Workers run :mod:`.decode_worker` (JSON headers and raw bytes: nothing is unpickled), started from
a fixed command, so the caller's main module is never imported again, as :mod:`multiprocessing`
would.  A pool copied into a forked child starts its own workers there.  Unix only.
"""

from __future__ import annotations

import operator
import os
import queue
import selectors
import signal
import subprocess
import sys
import threading
import weakref
from pathlib import Path
from typing import Any, Protocol, Sequence

import numpy as np

from .decode_worker import BOOTSTRAP, READY, ProtocolError, arrays_in, description, payload_bytes, read_message, write_message
from .interrupts import Interrupt, shielded
from .media import DEFAULT_LIMITS, DecodedAudio, MediaError, MediaLimits, MediaReason, MediaSource, load_audio, load_image, resample
from .waits import wait_s

try:
    import fcntl
except ImportError:  # not a Unix system: a DecodePool refuses to start there
    fcntl = None  # type: ignore[assignment]

__all__ = ["DecodePool", "Decoder", "INLINE", "InlineDecoder"]

_PIPE_BYTES = 1 << 20  # a reply pipe this wide holds a few seconds of audio whole: read in one call
_STOPPED = {signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT}  # endings that are not the input's fault


class Decoder(Protocol):
    """Turns media sources into arrays, as :func:`~.media.load_image` and :func:`~.media.load_audio` do."""

    def image(self, source: MediaSource, limits: MediaLimits = DEFAULT_LIMITS) -> np.ndarray: ...

    def audio(
        self, source: MediaSource, sample_rate: int | None = None, limits: MediaLimits = DEFAULT_LIMITS
    ) -> tuple[np.ndarray, int]: ...

    def clip(
        self, source: MediaSource, sample_rate: int | None = None, limits: MediaLimits = DEFAULT_LIMITS,
        whole_at: Sequence[int] = (),
    ) -> DecodedAudio:
        """The clip :meth:`audio` gives; the whole of it may come resampled to the rates of
        ``whole_at`` already (an :class:`~.media.DecodedAudio` makes those it lacks on demand)."""
        ...

    def resample(self, signals: Sequence[np.ndarray], orig_sr: int, target_sr: int) -> list[np.ndarray]:
        """Each signal as :func:`~.media.resample` makes it."""
        ...


class InlineDecoder:
    """Decodes in the calling thread."""

    def image(self, source: MediaSource, limits: MediaLimits = DEFAULT_LIMITS) -> np.ndarray:
        return load_image(source, limits)

    def audio(
        self, source: MediaSource, sample_rate: int | None = None, limits: MediaLimits = DEFAULT_LIMITS
    ) -> tuple[np.ndarray, int]:
        return load_audio(source, sample_rate, limits)

    def clip(
        self, source: MediaSource, sample_rate: int | None = None, limits: MediaLimits = DEFAULT_LIMITS,
        whole_at: Sequence[int] = (),
    ) -> DecodedAudio:
        return DecodedAudio(*load_audio(source, sample_rate, limits))  # resampled on demand: here is as good as later

    def resample(self, signals: Sequence[np.ndarray], orig_sr: int, target_sr: int) -> list[np.ndarray]:
        return [resample(signal, orig_sr, target_sr) for signal in signals]


INLINE = InlineDecoder()


def _request(
    kind: str, source: MediaSource, sample_rate: int | None, limits: MediaLimits, whole_at: Sequence[int] = ()
) -> tuple[dict[str, Any], bytes]:
    header: dict[str, Any] = {"kind": kind, "rate": sample_rate, "limits": vars(limits), "whole_at": list(dict.fromkeys(map(int, whole_at)))}
    if isinstance(source, bytes):
        return header, source
    path = os.fsdecode(source)
    header["path"] = path  # as given: messages name it as decoding here would
    if not os.path.isabs(path):
        try:
            header["cwd"] = os.getcwd()  # read from this process's working folder
        except FileNotFoundError:  # that folder is gone: the path names nothing, as it would here
            raise MediaError(MediaReason.MISSING, f"no such file: {path}") from None
    return header, b""


class _Worker:
    """One decoding process, its request pipe (its standard input) and its reply pipe.
    ``holder``: a weak reference to the token of the decode using it (None: idle); ``sent``: a
    request of that decode went out, so the process may be busy with it."""

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
        self.holder: weakref.ref[_Token] | None = None
        self.sent = False

    def state(self) -> str:
        """``held`` by a decode still running; ``idle`` (free, claimed by a decode that ended before
        sending, or one that finished whose giving back is yet to come or was cut short); ``left``
        by a decode that ended mid-request without giving it back (the process may still be busy).
        A decode has ended when it says so or when its token is gone: an exception kept somewhere
        can keep a finished decode's frame, and its token, alive for long."""
        token = self.holder() if self.holder is not None else None
        if token is not None and token.ended is None:
            return "held"
        if self.holder is None or not self.sent or (token is not None and token.ended == "finished"):
            return "idle"
        return "left"

    def reply(self) -> tuple[dict[str, Any], np.ndarray]:
        while not self.selector.select(wait_s()):
            pass  # a deadline raised in this thread is delivered between these waits
        return read_message(self.replies)

    def start(self) -> None:
        """Wait for the ready message (once)."""
        if self.ready:
            return
        try:
            header, _ = self.reply()
        except (EOFError, ProtocolError):
            raise RuntimeError(f"a decoding process failed to start ({_ending(self.ended())})") from None
        if header.get("ready") != READY:
            raise RuntimeError("a decoding process failed to start (no ready message)")
        self.ready = True

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


class _Token:
    """Names one decode; weakly held by the worker it takes.  ``ended``: "finished" once its reply
    is read, "cut" when it ended otherwise."""

    def __init__(self) -> None:
        self.ended: str | None = None


def _ending(code: int) -> str:
    return f"signal {-code}" if code < 0 else f"exit status {code}"


def _death(code: int) -> BaseException:
    """What a process that died while decoding an input means for that input."""
    if code < 0 and -code in _STOPPED:
        return RuntimeError(f"a decoding process was stopped ({_ending(code)})")
    return MediaError(MediaReason.UNDECODABLE, f"decoding ended its process ({_ending(code)}: a crash in the decoder, or a kill for memory)")


def _result(header: dict[str, Any], data: np.ndarray) -> tuple[list[np.ndarray], int | None, dict[int, int]]:
    """The reply's arrays (made on its bytes, without copies), the rate, and which array is the
    whole clip at which other rate."""
    if "media_error" in header:
        raise MediaError(*header["media_error"])
    if header.get("out_of_memory"):
        raise MemoryError()
    if "error" in header:
        raise RuntimeError(f"decoding failed in its process: {header['error']}")
    arrays = arrays_in(header["arrays"], data)  # flags as decoding here would leave them
    return arrays, header["rate"], {int(rate): index for rate, index in header["resampled"].items()}


class DecodePool:
    """Decodes in up to ``processes`` worker processes, started as decodes need them;
    :meth:`close` ends them (so does dropping the pool).  A pickled pool is unpickled without
    workers, with its number of processes; one inherited by a forked child starts its own there.

    A decode takes an idle worker by marking it, under the pool's lock, with a weak reference to a
    token that only the decode holds, and gives it back by that token.  A deadline can land at any
    point of a thread's Python code -- as the worker is being taken, before the decode could name
    it, or inside the giving back -- so a worker whose decode has ended without giving it back is
    taken back by the next decode that looks for one.  A decode has ended once its token says so
    (the first thing its end does) or is gone: a caller may keep the timeout, and with it the
    decode's frame and token, for as long as it likes.  A worker left while its request may still
    be running (the deadline came during the decode) is ended."""

    def __init__(self, processes: int) -> None:
        if processes < 1:
            raise ValueError("a decode pool needs at least 1 process")
        if os.name == "nt":
            raise RuntimeError("decoding processes need a Unix system")
        self.processes = processes
        self._lock = threading.Lock()
        self._freed: queue.SimpleQueue[bool] = queue.SimpleQueue()  # a nudge to threads waiting for a worker
        self._workers: list[_Worker] = []
        self._pid = os.getpid()
        self._closed = False
        weakref.finalize(self, _end_all, self._workers, self._pid)
        _POOLS.add(self)

    def image(self, source: MediaSource, limits: MediaLimits = DEFAULT_LIMITS) -> np.ndarray:
        arrays, _, _ = self._decode(*_request("image", source, None, limits))
        return arrays[0]

    def audio(
        self, source: MediaSource, sample_rate: int | None = None, limits: MediaLimits = DEFAULT_LIMITS
    ) -> tuple[np.ndarray, int]:
        decoded = self.clip(source, sample_rate, limits)
        return decoded.samples, decoded.rate

    def clip(
        self, source: MediaSource, sample_rate: int | None = None, limits: MediaLimits = DEFAULT_LIMITS,
        whole_at: Sequence[int] = (),
    ) -> DecodedAudio:
        """Decoded, and resampled to the rates of ``whole_at``, in a worker."""
        arrays, rate, resampled = self._decode(*_request("audio", source, sample_rate, limits, whole_at))
        return DecodedAudio(arrays[0], rate, {target: arrays[index] for target, index in resampled.items()})  # type: ignore[arg-type]

    def resample(self, signals: Sequence[np.ndarray], orig_sr: int, target_sr: int) -> list[np.ndarray]:
        """Resampled in a worker, all in one request; where the worker fails (whatever the reason:
        an error, memory, its death or its start), here, which meets the failure as resampling
        here always did.  A deadline raised meanwhile is let through."""
        inputs = [np.asarray(signal) for signal in signals]
        if orig_sr == target_sr or not inputs or any(array.ndim != 1 for array in inputs):
            return INLINE.resample(signals, orig_sr, target_sr)  # nothing to gain, or resample's own refusal
        header = {
            "kind": "resample", "from": operator.index(orig_sr), "to": operator.index(target_sr),
            "arrays": [description(array) for array in inputs],
        }  # fmt: skip
        try:
            arrays, _, _ = self._decode(header, *(payload_bytes(array) for array in inputs))
            return arrays
        except Interrupt:
            raise
        except Exception:  # noqa: BLE001  (resampled below, out of this handler: nothing chained to its failures)
            pass
        return INLINE.resample(signals, orig_sr, target_sr)

    def close(self) -> None:
        """End every worker; decodes still running, and later calls, raise RuntimeError."""
        with self._lock:
            self._closed = True
            workers = self._workers[:] if self._pid == os.getpid() else []
            self._workers.clear()
        for worker in workers:
            worker.end()

    def __enter__(self) -> "DecodePool":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getstate__(self) -> dict[str, int]:
        return {"processes": self.processes}

    def __setstate__(self, state: dict[str, int]) -> None:
        self.__init__(state["processes"])  # type: ignore[misc]

    def _take(self, token: _Token) -> _Worker:
        """An idle worker (replaced if it died while idle), a new one while there are fewer than
        ``processes``, else the next one given back; marked with ``token``."""
        while True:
            with self._lock:
                if self._closed:
                    raise RuntimeError("this decode pool is closed")
                if self._pid != os.getpid():  # a forked copy: the parent's workers are not ours to use
                    self._workers[:], self._pid = [], os.getpid()
                for worker in self._workers:
                    state = worker.state()
                    if state == "held":
                        continue
                    if state == "idle" and worker.process.poll() is None:
                        worker.holder, worker.sent = weakref.ref(token), False
                        return worker
                    # died between decodes (not this input's doing), or left mid-request by a decode
                    # that ended without giving it back: replaced
                    with shielded():  # forgotten but not ended, it would run on unseen
                        self._workers.remove(worker)
                        worker.end()
                    break
                if len(self._workers) < self.processes:
                    with shielded():  # cut after its fork, a process is never reaped
                        worker = _Worker()
                        worker.holder = weakref.ref(token)
                        self._workers.append(worker)
                    return worker
            try:
                self._freed.get(timeout=wait_s())  # a deadline raised in this thread is delivered between waits
            except queue.Empty:
                pass

    def _give_back(self, token: _Token, finished: bool) -> None:
        """Free the worker marked ``token``, or end it when its request may still be running."""
        with shielded():  # a worker taken out of the list is ended, never left running unseen
            with self._lock:
                worker = next((w for w in self._workers if w.holder is not None and w.holder() is token), None)
                if worker is None:
                    return
                if worker.sent and not finished:
                    self._workers.remove(worker)
                else:
                    worker.holder, worker.sent, worker = None, False, None
            if worker is not None:
                worker.end()

    def _nudge(self) -> None:
        """Wake a thread waiting for a worker."""
        if self._freed.qsize() < self.processes:  # nudges beyond one per worker would only pile up
            self._freed.put(True)

    def _decode(self, header: dict[str, Any], *payloads: bytes | memoryview) -> tuple[list[np.ndarray], int | None, dict[int, int]]:
        token, finished = _Token(), False
        try:
            worker = self._take(token)
            worker.sent = True  # from here a message may be half read or written: interrupted, it is ended
            worker.start()
            try:
                write_message(worker.process.stdin, header, *payloads)  # type: ignore[arg-type]
                message = worker.reply()
            except (EOFError, BrokenPipeError, ProtocolError):
                code = worker.ended()
                if self._closed:
                    raise RuntimeError("this decode pool was closed while decoding") from None
                raise _death(code) from None
            finished = True
        finally:
            token.ended = "finished" if finished else "cut"  # known even where a deadline cuts the giving back short
            try:
                self._give_back(token, finished)
            finally:  # also where a timeout (held back by its step, or landing as it began) cut it short
                self._nudge()
        return _result(*message)


_POOLS: "weakref.WeakSet[DecodePool]" = weakref.WeakSet()


def _after_fork_in_child() -> None:
    """A child forked while another thread held a pool's lock would wait for it for ever: the
    child's pools get fresh ones (their workers are the parent's, and dropped at the next decode)."""
    for pool in list(_POOLS):
        pool._lock = threading.Lock()
        pool._freed = queue.SimpleQueue()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _end_all(workers: list[_Worker], pid: int) -> None:
    if os.getpid() == pid:  # a forked child leaves its parent's workers alone
        for worker in workers:
            worker.process.kill()
