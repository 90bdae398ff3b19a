"""What cache keys must tell apart: every byte of a checkpoint, the device type, the judge endpoint.

* ``checkpoint_digest`` reads whole files; large ones are memoised per (path, stat) in this process
  and in ``<cache dir>/file_digests.sqlite``, never across a changed stat or for a file changed
  within the racy window;
* the device type (cpu / cuda / mps) is part of every backend fingerprint, found without loading;
* judge replies are keyed by endpoint (remote) or checkpoint fingerprint + device type (local).
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from mmverify.core import hashing
from mmverify.models import digests as digests_module
from mmverify.models.digests import checkpoint_digest
from mmverify.models.cache import OutputCache
from mmverify.models.clap_hf import HFClap
from mmverify.models.judge import JudgeCache
from mmverify.models.judge_local import TransformersVLMJudge
from mmverify.testing.tiny_models import build_tiny_clap
from tests.vlm_server import VLMServer, always

BIG = 17 * 1024 * 1024  # over the 16 MiB that are read on every digest
FAR_FUTURE_NS = 2**62  # a clock far past every file's ctime: no file is racy


@pytest.fixture
def cache_dir(tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("MMVERIFY_CACHE_DIR", str(folder))
    monkeypatch.setattr(digests_module, "_WHOLE_FILE_MEMO", {}, raising=False)
    return folder


def big_checkpoint(folder: Path) -> Path:
    folder.mkdir()
    (folder / "config.json").write_text('{"hidden": 4}')
    with open(folder / "model.safetensors", "wb") as handle:
        handle.write(b"\x01" * BIG)
    return folder / "model.safetensors"


def count_reads(monkeypatch) -> list[Path]:
    reads: list[Path] = []
    real = digests_module.sha256_file

    def counted(path):
        reads.append(Path(path))
        return real(path)

    monkeypatch.setattr(digests_module, "sha256_file", counted)
    return reads


def test_an_interior_edit_of_a_large_file_changes_the_digest(tmp_path, cache_dir):
    weights = big_checkpoint(tmp_path / "ckpt")
    before = checkpoint_digest(tmp_path / "ckpt")
    stat = weights.stat()
    with open(weights, "r+b") as handle:  # fine-tuned in place: same size, same header and tail
        handle.seek(BIG // 2)
        handle.write(b"\x02" * 4096)
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # and the mtime kept
    assert weights.stat().st_size == stat.st_size
    assert checkpoint_digest(tmp_path / "ckpt") != before
    assert checkpoint_digest(weights) != checkpoint_digest(tmp_path / "ckpt")  # a file alone differs from its folder


def test_large_file_digests_are_memoised_per_stat_and_never_across_a_change(tmp_path, cache_dir, monkeypatch):
    monkeypatch.setattr(hashing, "_now_ns", lambda: FAR_FUTURE_NS)
    weights = big_checkpoint(tmp_path / "ckpt")
    reads = count_reads(monkeypatch)
    first = checkpoint_digest(tmp_path / "ckpt")
    assert len(reads) == 1
    assert checkpoint_digest(tmp_path / "ckpt") == first and len(reads) == 1  # this process's memo
    monkeypatch.setattr(digests_module, "_WHOLE_FILE_MEMO", {})  # as a new process: the sidecar answers
    assert checkpoint_digest(tmp_path / "ckpt") == first and len(reads) == 1
    rows = sqlite3.connect(cache_dir / "file_digests.sqlite").execute("SELECT path FROM file_digests").fetchall()
    assert rows == [(str(weights.resolve()),)]

    # Replaced by a same-size file with the old mtime (cp -p, rsync -a): another inode, read again.
    stat = weights.stat()
    replacement = weights.with_name("new.tmp")
    replacement.write_bytes(b"\x01" * (BIG - 1) + b"\x03")
    os.utime(replacement, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    os.replace(replacement, weights)
    changed = checkpoint_digest(tmp_path / "ckpt")
    assert changed != first and len(reads) == 2


def test_a_file_changed_within_the_racy_window_is_never_memoised(tmp_path, cache_dir, monkeypatch):
    weights = big_checkpoint(tmp_path / "ckpt")
    monkeypatch.setattr(hashing, "_now_ns", lambda: weights.stat().st_ctime_ns)  # "just written"
    reads = count_reads(monkeypatch)
    first = checkpoint_digest(tmp_path / "ckpt")
    assert checkpoint_digest(tmp_path / "ckpt") == first and len(reads) == 2
    assert not (cache_dir / "file_digests.sqlite").exists()


def test_small_files_keep_the_digest_they_always_had(tmp_path, cache_dir):
    folder = tmp_path / "m"
    (folder / "sub").mkdir(parents=True)
    (folder / "config.json").write_text('{"a": 1}')
    (folder / "w.bin").write_bytes(bytes(range(256)) * 4)
    (folder / "sub" / "x.txt").write_text("hi")
    # computed by the digest of earlier releases (first and last MiB of large files only)
    assert checkpoint_digest(folder) == "919e4e81791f98d3"
    assert checkpoint_digest(folder / "w.bin") == "185d33bb5c819706"
    assert not (cache_dir / "file_digests.sqlite").exists()  # nothing large: no sidecar


# -- the device type -----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_clap(tmp_path_factory) -> Path:
    return build_tiny_clap(tmp_path_factory.mktemp("clap") / "clap")


def test_the_device_type_keys_outputs_without_loading_the_model(tiny_clap, tmp_path):
    cpu = HFClap(source=str(tiny_clap), device="cpu", batch_size=2, cache=OutputCache(tmp_path / "outputs.sqlite"))
    cuda = HFClap(source=str(tiny_clap), device="cuda:1", batch_size=2, cache=OutputCache(tmp_path / "outputs.sqlite"))
    assert ";rows=2;row=content;device=cpu;" in cpu.fingerprint
    assert ";rows=2;device=cuda;" in cuda.fingerprint  # the type, never the index; rows packed there
    assert not cpu._loaded and not cuda._loaded

    text = "a dog barking"
    cpu.embed_text([text])  # stored under the CPU key

    def key(backend: HFClap) -> str:
        return OutputCache.key(backend.fingerprint, "clap_text", hashlib.sha256(text.encode("utf-8")).hexdigest())

    assert cpu.cache.get_array(key(cpu)) is not None
    assert cuda.cache.get_array(key(cuda)) is None  # CPU outputs are never served on CUDA
    assert cpu.device_type == "cpu" and cuda.device_type == "cuda"


def test_a_local_judge_keys_replies_by_checkpoint_and_device_type(tiny_clap, tmp_path):
    cpu = TransformersVLMJudge(str(tiny_clap), device="cpu")
    cuda = TransformersVLMJudge(str(tiny_clap), device="cuda")
    assert cpu.model_id != cuda.model_id
    assert cpu.model_id == f"transformers-vlm:{checkpoint_digest(tiny_clap)};rows=1;device=cpu"
    assert not cpu._loaded and not cuda._loaded

    cache = JudgeCache(tmp_path / "judge.sqlite")
    cpu.cache = cuda.cache = cache
    from mmverify.models.judge_wire import request_key

    params = {"decoding": "greedy", "max_tokens": 8}
    cache.put(request_key(cpu.model_id, "Is there a dog?", [], params), cpu.model_id, "Yes")
    assert cpu.ask("Is there a dog?", max_tokens=8) == "Yes"  # a hit: no weights loaded
    assert cache.get(request_key(cuda.model_id, "Is there a dog?", [], params)) is None


# -- the judge endpoint ----------------------------------------------------------------------------------
def test_two_endpoints_serving_one_model_name_never_share_replies(tmp_path):
    first, second = VLMServer(), VLMServer()
    first.script(always("Yes"))
    second.script(always("No"))
    try:
        cache = JudgeCache(tmp_path / "judge.sqlite")
        a = first.judge(model="qwen", cache=cache)
        b = second.judge(model="qwen", cache=cache)
        assert (a.ask("Is there a dog?"), b.ask("Is there a dog?")) == ("Yes", "No")
        assert (first.count, second.count) == (1, 1)
        assert a.ask("Is there a dog?") == "Yes" and first.count == 1  # each endpoint's reply is cached
        # the same endpoint written another way shares them
        same = first.judge(model="qwen", cache=cache, base_url=first.url.replace("http://", "HTTP://") + "/")
        assert same.ask("Is there a dog?") == "Yes" and first.count == 1
    finally:
        first.close()
        second.close()


def test_endpoint_names_are_normalised():
    from mmverify.models.judge_endpoint import endpoint_id

    assert endpoint_id("HTTP://Example.COM:80/v1/") == "http://example.com/v1"
    assert endpoint_id("https://example.com:443/v1") == "https://example.com/v1"
    assert endpoint_id("http://example.com:443/v1") == "http://example.com:443/v1"
    assert endpoint_id("https://user:secret@example.com/v1") == "https://example.com/v1"  # never a credential
    assert endpoint_id("http://[::1]:8000/v1") == "http://[::1]:8000/v1"
    assert endpoint_id("http://example.com/V1") != endpoint_id("http://example.com/v1")  # paths are case-sensitive
    assert endpoint_id("http://example.com/v1?deployment=a") != endpoint_id("http://example.com/v1?deployment=b")


def test_rows_are_placed_by_content_on_a_cpu_and_packed_on_an_accelerator_unless_asked(tiny_clap):
    def backend(device: str, rows: str = "auto") -> HFClap:
        return HFClap(source=str(tiny_clap), device=device, batch_size=4, rows=rows)

    assert backend("cpu").rows_by_content and not backend("cuda").rows_by_content
    assert backend("cuda", "content").rows_by_content and not backend("cpu", "packed").rows_by_content
    assert ";rows=4;device=cpu;" in backend("cpu", "packed").fingerprint  # the rule keys the outputs
    assert ";rows=4;row=content;device=cuda;" in backend("cuda", "content").fingerprint
    assert backend("cpu").fingerprint == backend("cpu", "content").fingerprint
    one_row = HFClap(source=str(tiny_clap), device="cpu", batch_size=1)
    assert ";rows=1;device=cpu;" in one_row.fingerprint  # a single row has no placement
    with pytest.raises(ValueError, match="rows must be one of auto, content, packed"):
        backend("cpu", "sorted")


def test_every_batching_backend_takes_the_rows_rule_as_a_spec_option():
    from mmverify.models.hub import backend_options

    for name in ("clap-hf", "laion-clap", "whisper-hf", "whisper-hf-zh", "whisper-openai", "wavlm-sv", "gender-w2v2", "dreamsim"):
        assert backend_options(name, {"rows": "packed"}) == {"rows": "packed"}
        with pytest.raises(ValueError, match="must be one of auto, content, packed"):
            backend_options(name, {"rows": "sorted"})
