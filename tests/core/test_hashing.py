from pathlib import Path

from mmverify.core.hashing import FileDigests, canonical_json, digest_of, sha256_bytes


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
