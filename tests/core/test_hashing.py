from pathlib import Path

from mmverify.core.hashing import FileDigests, canonical_json, digest_of, sha256_bytes
from tests.waiting import wait_until


def test_canonical_json_ignores_key_order_and_whitespace():
    assert canonical_json({"b": 1, "a": [1, 2]}) == canonical_json({"a": [1, 2], "b": 1}) == '{"a":[1,2],"b":1}'
    assert digest_of({"x": 1}, "y") == digest_of({"x": 1}, "y") != digest_of({"x": 2}, "y")


def test_file_digest_tracks_content(tmp_path: Path):
    path = tmp_path / "f.bin"
    path.write_bytes(b"abc")
    digests = FileDigests()
    assert digests(path) == sha256_bytes(b"abc")
    path.write_bytes(b"abcd")  # size changes, so the memo entry does not apply
    assert digests(path) == sha256_bytes(b"abcd")


def test_a_rewrite_that_keeps_size_and_mtime_is_still_seen(tmp_path: Path, monkeypatch):
    import os

    from mmverify.core import hashing

    monkeypatch.setattr(hashing, "_now_ns", lambda: 1 << 62)  # every stat old enough to be trusted
    path = tmp_path / "f.bin"
    path.write_bytes(b"abc")
    digests = FileDigests()
    assert digests(path) == sha256_bytes(b"abc") and len(digests) == 1
    before = path.stat()

    def rewritten() -> bool:  # same size, the old mtime put back, as a coarse clock or a copy would
        path.write_bytes(b"xyz")
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
        return path.stat().st_ctime_ns != before.st_ctime_ns  # until the kernel's clock ticks

    wait_until(rewritten)
    assert path.stat().st_mtime_ns == before.st_mtime_ns and path.stat().st_size == before.st_size
    assert digests(path) == sha256_bytes(b"xyz")  # the ctime moved


def test_a_file_changed_just_now_is_not_memoised(tmp_path: Path, monkeypatch):
    from mmverify.core import hashing

    path = tmp_path / "f.bin"
    path.write_bytes(b"abc")
    monkeypatch.setattr(hashing, "_now_ns", lambda: path.stat().st_ctime_ns)  # "just written"
    digests = FileDigests()
    assert digests(path) == sha256_bytes(b"abc") and len(digests) == 0
