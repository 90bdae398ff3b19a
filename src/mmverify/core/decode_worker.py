"""The decoding process of :class:`~mmverify.core.decoding.DecodePool`, and the protocol it speaks.

A worker reads requests on its standard input and writes replies on a pipe of its own (its
standard output is not used: whatever a library prints at start-up or later cannot reach the
replies).  Each message is a 4-byte header length, a JSON header, then ``header["size"]`` raw
bytes.  A request names a file (with the caller's working folder, for relative paths) or carries
the media's bytes, and may ask for the whole decoded clip resampled to other rates too; or it
carries arrays to resample.  A reply is each array's dtype and shape with their bytes one after
the other, or the error.  JSON and raw bytes only: nothing is unpickled on either side.

On a socket (:class:`SocketStream`, the model process's wire) a message crosses in few system
calls: its parts go out in one gathered send, and its payload comes in one read that waits for all
of it.  Each call gives the interpreter lock back and must win it again, which can take a switch
interval (5 ms) while other threads run Python code: a payload of megabytes read a socket buffer
at a time would wait seconds.
"""

from __future__ import annotations

import json
import math
import os
import signal
import socket
import sys
from typing import Any, BinaryIO, Callable

import numpy as np

from .media import MediaError, MediaLimits, MediaReason, MediaSource, load_audio, load_image, resample

READY = "mmverify-decoding/2"  # the first message of a worker: it started, and speaks this protocol
MAX_HEADER_BYTES = 1 << 20  # a longer header is not this protocol: the worker is broken

# ``python -c`` puts the working folder first on sys.path, where a json.py of the user's would
# shadow the standard library: it goes before anything is imported.  The package's own folder
# comes first where it is not on the path (a source tree).
BOOTSTRAP = (
    "import sys; getattr(sys.flags, 'safe_path', False) or sys.path.pop(0); root = sys.argv[2]; "
    "root in sys.path or sys.path.insert(0, root); from mmverify.core.decode_worker import main; main(int(sys.argv[1]))"
)


class ProtocolError(Exception):
    """The other end sent something that is not this protocol."""


def write_message(stream: BinaryIO, header: dict[str, Any], *payloads: bytes | memoryview) -> None:
    """``header`` and the payloads, sent as one payload of their bytes one after the other."""
    bodies = [memoryview(payload).cast("B") for payload in payloads]  # lengths in bytes, whatever the arrays' shapes
    encoded = json.dumps({**header, "size": sum(len(body) for body in bodies)}).encode()
    buffers = [memoryview(len(encoded).to_bytes(4, "big") + encoded), *(body for body in bodies if body)]
    if isinstance(stream, SocketStream):
        stream.send_all(buffers)
        return
    for data in buffers:
        while data:
            written = stream.write(data)  # an unbuffered pipe may take part of it
            data = data[written if written is not None else len(data) :]
    stream.flush()


class SocketStream:
    """A connected stream socket as :func:`read_message` and :func:`write_message` use it, each in
    as few system calls as it takes: a read waits for all the bytes asked for (``MSG_WAITALL``),
    and a message's parts go out in one gathered send.  The socket stays its owner's to close."""

    MAX_BUFFERS = 1024  # what one gathered send takes on Linux (IOV_MAX)

    def __init__(self, connection: socket.socket) -> None:
        self._socket = connection

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        return self._socket.recv_into(view, len(view), socket.MSG_WAITALL)

    def send_all(self, buffers: list[memoryview]) -> None:
        """Every byte of ``buffers``, in order (a signal may cut a send short: the rest follows)."""
        while buffers:
            sent = self._socket.sendmsg(buffers[: self.MAX_BUFFERS])
            done = 0
            while done < len(buffers) and sent >= len(buffers[done]):
                sent -= len(buffers[done])
                done += 1
            buffers = buffers[done:]
            if sent:
                buffers[0] = buffers[0][sent:]


def payload_bytes(array: np.ndarray) -> memoryview:
    """``array``'s bytes in C order, as a payload, whatever its dtype and shape (empty ones included)."""
    return memoryview(np.ascontiguousarray(array).reshape(-1).view(np.uint8))


def _uninitialised(size: int) -> np.ndarray:
    """Writable bytes that are all overwritten by a read: a payload of megabytes is not cleared
    first (a ``bytearray`` would be, holding the interpreter lock)."""
    return np.empty(size, dtype=np.uint8)


def _references(kept: list[np.ndarray], index: int) -> int:
    return sys.getrefcount(kept[index])


# what _references counts for a buffer that only its list holds (the interpreter's own count of
# the call's temporary references, measured rather than assumed)
_ONLY_KEPT = _references([np.empty(0, dtype=np.uint8)], 0)


class KeptBuffers:
    """Payload buffers of one connection, kept to read the messages after into.  The model
    process reads a batch of clips (a hundred megabytes at 128 five-second clips) per message; a
    fresh buffer that size costs the kernel its page faults and zeroing on every batch, more CPU
    than copying the bytes in.  A kept buffer is read into again only once nothing made on its
    bytes is alive: every array, view, tensor or memoryview made on it refers to it, which its
    reference count tells.  Payloads under ``min_size`` bytes come from the heap as before."""

    def __init__(self, keep: int = 2, min_size: int = 1 << 20) -> None:
        self._kept: list[np.ndarray] = []
        self._keep, self._min_size = keep, min_size

    def take(self, size: int) -> np.ndarray:
        """``size`` writable bytes: the first unused kept buffer that is large enough, or a new one
        (kept where there is room, or in place of an unused smaller one)."""
        if size < self._min_size:
            return _uninitialised(size)
        unused = [index for index in range(len(self._kept)) if _references(self._kept, index) == _ONLY_KEPT]
        for index in unused:
            if self._kept[index].size >= size:
                return self._kept[index][:size]
        buffer = _uninitialised(size)
        if len(self._kept) < self._keep:
            self._kept.append(buffer)
        elif unused:
            self._kept[unused[0]] = buffer
        return buffer


def _read_exactly(stream: BinaryIO, size: int, buffer: Callable[[int], Any] = bytearray) -> Any:
    """``size`` bytes into a new ``buffer(size)``: writable, so that arrays are made on it without a copy."""
    data = buffer(size)
    view, got = memoryview(data), 0
    while got < size:
        count = stream.readinto(view[got:])  # type: ignore[attr-defined]  (an unbuffered pipe may give part)
        if not count:
            raise EOFError("the other end closed its pipe")
        got += count
    return data


def read_message(
    stream: BinaryIO, max_size: int | None = None, payload: Callable[[int], np.ndarray] = _uninitialised
) -> tuple[dict[str, Any], np.ndarray]:
    """A message's header and payload, read into ``payload(size)``; a payload over ``max_size``
    bytes is not this protocol."""
    length = int.from_bytes(_read_exactly(stream, 4), "big")
    if length > MAX_HEADER_BYTES:
        raise ProtocolError(f"a header of {length} bytes")
    try:
        header = json.loads(_read_exactly(stream, length))
        size = int(header["size"])
    except (ValueError, TypeError, KeyError) as exc:
        raise ProtocolError(f"not a header ({exc})") from None
    if size < 0 or (max_size is not None and size > max_size):
        raise ProtocolError(f"a payload of {size} bytes")
    return header, _read_exactly(stream, size, payload)


def arrays_in(described: list[dict[str, Any]], data: Any) -> list[np.ndarray]:
    """The arrays a header describes (dtype, shape, writeable), made on the payload's bytes one
    after the other, without copies."""
    arrays, offset = [], 0
    for description in described:
        dtype = np.dtype(description["dtype"])
        count = math.prod(description["shape"])
        array = np.frombuffer(data, dtype=dtype, count=count, offset=offset).reshape(description["shape"])
        array.flags.writeable = bool(description["writeable"])  # as made on the other side
        arrays.append(array)
        offset += count * dtype.itemsize
    return arrays


def _answer(header: dict[str, Any], payload: np.ndarray) -> tuple[Any, ...]:
    """The reply's header and payloads: the decoded array, then each resampling of it asked for;
    or, for a resampling request, each of its arrays resampled."""
    if header["kind"] == "resample":
        return _resampling(header, payload)
    try:
        limits = MediaLimits(**header["limits"])
        if "path" in header:
            source: MediaSource = header["path"]
            if header.get("cwd") is not None and not _entered(header["cwd"]):
                # the caller's folder is gone: its relative path names nothing
                return {"media_error": [MediaReason.MISSING, f"no such file: {source}"]}, b""
        else:
            source = bytes(payload)
        if header["kind"] == "image":
            array, rate = load_image(source, limits), None
        else:
            array, rate = load_audio(source, header["rate"], limits)
    except MediaError as exc:
        return ({"media_error": [exc.reason, exc.message]},)
    except MemoryError:
        return ({"out_of_memory": True},)
    except Exception as exc:  # noqa: BLE001  (reported to the caller, which raises it)
        return ({"error": f"{type(exc).__name__}: {exc}"},)
    arrays, resampled = [array], {}
    for target in header.get("whole_at", ()):
        made = _resampled(array, rate, target)
        if made is not None:
            resampled[str(target)] = len(arrays)
            arrays.append(made)
    return _reply(arrays, rate, resampled)


def _resampling(header: dict[str, Any], payload: np.ndarray) -> tuple[Any, ...]:
    """Each array of the request resampled from ``from`` to ``to`` Hz.  A failure is reported as an
    error, whatever it is: the caller then resamples itself and meets it where it always did."""
    try:
        made = [resample(signal, header["from"], header["to"]) for signal in arrays_in(header["arrays"], payload)]
    except Exception as exc:  # noqa: BLE001  (MemoryError included)
        return ({"error": f"{type(exc).__name__}: {exc}"},)
    return _reply(made, header["to"], {})


def _reply(arrays: list[np.ndarray], rate: int | None, resampled: dict[str, int]) -> tuple[Any, ...]:
    described = [description(item) for item in arrays]  # flags read before the arrays are made contiguous
    return ({"arrays": described, "rate": rate, "resampled": resampled}, *(payload_bytes(item) for item in arrays))


def _resampled(array: np.ndarray, rate: int, target: int) -> np.ndarray | None:
    """The whole clip at ``target`` as the caller would make it, or None where making it fails or
    gives the clip itself: the caller then makes it (or meets the failure) where it needs it."""
    if target == rate or not array.size:
        return None
    try:
        return resample(array, rate, target)
    except Exception:  # noqa: BLE001  (MemoryError included: the caller's own try reports it as it always did)
        return None


def description(array: np.ndarray) -> dict[str, Any]:
    """What :func:`arrays_in` needs to make ``array`` again on the other side."""
    return {"dtype": array.dtype.str, "shape": list(array.shape), "writeable": bool(array.flags.writeable)}


def _entered(folder: str) -> bool:
    """Whether this process now works in ``folder`` (the caller's, for its relative paths): entered
    on every request, as the worker's own folder may have been removed since the last."""
    try:
        os.chdir(folder)
    except OSError:
        return False
    return True


def serve(requests: BinaryIO, replies: BinaryIO) -> None:
    """Answer each request until the caller closes its end."""
    try:
        write_message(replies, {"ready": READY})
        while True:
            write_message(replies, *_answer(*read_message(requests)))
    except (EOFError, BrokenPipeError, ProtocolError):
        return


def main(reply_fd: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the caller decides when to stop
    with os.fdopen(reply_fd, "wb", buffering=0) as replies:  # nothing left to flush into a closed pipe
        serve(sys.stdin.buffer, replies)
