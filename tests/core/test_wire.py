"""The message wire shared by the decoding processes and the model process: a message crosses a
socket whole whatever part each system call takes, and in few calls -- each one gives the
interpreter lock back, and winning it again can take a switch interval while other threads run."""

from __future__ import annotations

import socket
import threading

import numpy as np
import pytest

from mmverify.core.decode_worker import KeptBuffers, SocketStream, arrays_in, description, payload_bytes, read_message, write_message


class _Piecemeal:
    """Both ends of a socket whose every send and receive takes a seeded random part of what it
    is given, as a signal arriving mid-call would leave it."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.wire = bytearray()

    def sendmsg(self, buffers: list[memoryview]) -> int:
        data = b"".join(bytes(buffer) for buffer in buffers)
        taken = int(self.rng.integers(1, len(data) + 1))
        self.wire += data[:taken]
        return taken

    def recv_into(self, view: memoryview, size: int, flags: int) -> int:
        assert flags == socket.MSG_WAITALL and size == len(view)
        given = min(int(self.rng.integers(1, size + 1)), len(self.wire))
        view[:given] = self.wire[:given]
        del self.wire[:given]
        return given


class _Counting:
    """A socket that counts the calls that move a message's bytes."""

    def __init__(self, connection: socket.socket) -> None:
        self.connection = connection
        self.sends = self.receives = 0

    def sendmsg(self, buffers: list[memoryview]) -> int:
        self.sends += 1
        return self.connection.sendmsg(buffers)

    def recv_into(self, view: memoryview, size: int, flags: int) -> int:
        self.receives += 1
        return self.connection.recv_into(view, size, flags)


def _arrays(rng: np.random.Generator, count: int) -> list[np.ndarray]:
    dtypes = ["float32", "float64", "int16", "uint8", "complex64"]
    arrays = []
    for _ in range(count):
        shape = tuple(int(n) for n in rng.integers(0, 40, size=int(rng.integers(0, 3))))
        array = (rng.standard_normal(shape) * 100).astype(dtypes[int(rng.integers(0, len(dtypes)))])
        arrays.append(array.T if rng.integers(0, 2) else array)  # a non-contiguous view now and then
    return arrays


def _send_and_read(sending: SocketStream, receiving: SocketStream, arrays: list[np.ndarray]) -> list[np.ndarray]:
    write_message(sending, {"arrays": [description(a) for a in arrays]}, *(payload_bytes(a) for a in arrays))
    header, payload = read_message(receiving)
    return arrays_in(header["arrays"], payload)


def test_a_message_cut_at_any_byte_arrives_whole():
    for seed in range(40):
        rng = np.random.default_rng(seed)
        arrays = _arrays(rng, int(rng.integers(0, 12)))
        both_ends = SocketStream(_Piecemeal(seed))  # type: ignore[arg-type]
        back = _send_and_read(both_ends, both_ends, arrays)
        assert [(a.dtype, a.shape, a.tobytes()) for a in back] == [(a.dtype, a.shape, a.tobytes()) for a in arrays]


def test_more_parts_than_one_gathered_send_takes_arrive_in_order():
    arrays = [np.full(3, i, dtype=np.int32) for i in range(SocketStream.MAX_BUFFERS * 2 + 5)]
    left, right = socket.socketpair()
    with left, right:
        sending, receiving = _Counting(left), SocketStream(right)
        write_message(SocketStream(sending), {"n": len(arrays)}, *(payload_bytes(a) for a in arrays))  # type: ignore[arg-type]
        _, payload = read_message(receiving)
    assert np.array_equal(np.frombuffer(payload, dtype=np.int32), np.repeat(np.arange(len(arrays)), 3))
    assert sending.sends == 3  # a send takes at most MAX_BUFFERS parts: the header and 1023, 1024, then the rest


def test_a_large_message_crosses_in_one_send_and_one_read_of_its_payload():
    """Eight megabytes in 200 parts: one gathered send, and three reads (length, header, payload),
    where a plain socket stream would make one call per part and per socket buffer."""
    arrays = [np.full(10_000, i, dtype=np.float32) for i in range(200)]
    left, right = socket.socketpair()
    with left, right:
        sending, receiving = _Counting(left), _Counting(right)

        def send() -> None:
            try:
                write_message(SocketStream(sending), {"n": 200}, *(payload_bytes(a) for a in arrays))  # type: ignore[arg-type]
            finally:  # a send that fails ends the read too
                left.shutdown(socket.SHUT_WR)

        writer = threading.Thread(target=send)
        writer.start()
        _, payload = read_message(SocketStream(receiving))  # type: ignore[arg-type]
        writer.join()
    assert np.array_equal(np.frombuffer(payload, dtype=np.float32), np.repeat(np.arange(200, dtype=np.float32), 10_000))
    assert (sending.sends, receiving.receives) == (1, 3)


@pytest.mark.parametrize("shape", [(0,), (0, 3), (4, 0, 2), (), (3, 5)])
def test_payload_bytes_are_the_arrays_bytes_in_c_order(shape):
    array = np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape)
    for view in (array, array.T):
        assert bytes(payload_bytes(view)) == np.ascontiguousarray(view).tobytes()
    left, right = socket.socketpair()
    with left, right:  # an empty array crosses as no bytes at all
        back = _send_and_read(SocketStream(left), SocketStream(right), [array.T])
    assert back[0].shape == array.T.shape and back[0].tobytes() == np.ascontiguousarray(array.T).tobytes()


def test_a_closed_peer_ends_the_read():
    left, right = socket.socketpair()
    with right:
        stream = SocketStream(right)
        left.sendall(b"\x00\x00")  # half a length, then the end
        left.close()
        with pytest.raises(EOFError):
            read_message(stream)


def _address(array: np.ndarray) -> int:
    return array.__array_interface__["data"][0]


def _holding(array: np.ndarray, how: int) -> object:
    """Something alive made on all of ``array``'s bytes, as a backend may keep it."""
    import torch

    return [array, array[::1], array.reshape(1, -1), memoryview(array), torch.from_numpy(array)][how]


def _bytes_of(holder: object) -> bytes:
    return holder.numpy().tobytes() if hasattr(holder, "numpy") else bytes(holder) if isinstance(holder, memoryview) else holder.tobytes()  # type: ignore[attr-defined]


def test_kept_buffers_never_overwrite_what_a_received_array_still_holds():
    """Seeded runs of messages read into kept buffers while the arrays of some earlier messages
    (or views, memoryviews, tensors made on them) stay alive: each keeps its bytes, and buffers
    are read into again once nothing holds them."""
    for seed in range(12):
        rng = np.random.default_rng(seed)
        buffers = KeptBuffers(keep=2, min_size=64)
        both_ends = SocketStream(_Piecemeal(seed))  # type: ignore[arg-type]
        held: list[tuple[object, bytes]] = []
        taken_again = 0
        for _ in range(30):
            sent = np.asarray(rng.standard_normal(int(rng.integers(16, 200))), dtype=np.float32)
            write_message(both_ends, {"arrays": [description(sent)]}, payload_bytes(sent))
            header, payload = read_message(both_ends, payload=buffers.take)
            taken_again += payload.base is not None  # a view of a kept buffer, where a new one is its own
            (received,) = arrays_in(header["arrays"], payload)
            del payload
            assert received.tobytes() == sent.tobytes()
            if rng.integers(0, 3) == 0:
                held.append((_holding(received, int(rng.integers(0, 5))), sent.tobytes()))
            del received
            if held and rng.integers(0, 2) == 0:
                held.pop(int(rng.integers(0, len(held))))
            assert [_bytes_of(holder) for holder, _ in held] == [original for _, original in held]
        assert taken_again >= 10


def test_a_kept_buffer_is_taken_again_only_once_nothing_holds_it():
    buffers = KeptBuffers(keep=2, min_size=64)
    first = buffers.take(100)
    second = buffers.take(100)
    assert _address(first) != _address(second)
    third = buffers.take(100)  # both kept ones are held: a new buffer, not kept
    assert len({_address(first), _address(second), _address(third)}) == 3
    kept_first = _address(first)
    del first
    again = buffers.take(80)  # the first is free again and large enough
    assert _address(again) == kept_first
    del again, second, third
    assert len({_address(buffers.take(100)) for _ in range(5)}) == 1


def test_small_payloads_and_larger_messages_get_new_buffers():
    buffers = KeptBuffers(keep=1, min_size=64)
    small = [buffers.take(10) for _ in range(3)]
    assert all(array.size == 10 for array in small)
    big = _address(buffers.take(100))
    assert _address(buffers.take(100)) == big  # kept, and free
    larger = buffers.take(500)  # too large for the kept one: a new buffer, kept in its place
    assert larger.size == 500 and _address(larger) != big
    address = _address(larger)
    del larger
    assert _address(buffers.take(200)) == address
