"""Backend plumbing without real models: sources, fingerprints, availability, cache, hub specs."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import numpy as np
import pytest

from mmverify.core.registry import UnknownIdError
from mmverify.models.base import Backend, ModelUnavailable
from mmverify.models.digests import checkpoint_digest
from mmverify.models.cache import OutputCache, array_digest
from mmverify.models.hub import ModelHub, parse_spec, parse_specs


class EchoBackend(Backend):
    name = "echo"
    capability = "test"
    packages = ("numpy",)

    def _load(self, path: Path) -> None:
        self.loaded_from = path


@pytest.fixture
def offline_hub_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf" / "hub"))


def test_local_sources_load_and_missing_ones_say_so(tmp_path):
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "weights.bin").write_bytes(b"abc")
    backend = EchoBackend(source=str(tmp_path / "ckpt"))
    backend.ensure_loaded()
    assert backend.loaded_from == tmp_path / "ckpt" and backend.device == "cpu"
    missing = EchoBackend(source=str(tmp_path / "absent"))
    with pytest.raises(ModelUnavailable, match="does not exist") as info:
        missing.ensure_loaded()
    assert info.value.code == "model_unavailable"
    assert not missing.availability().ok


def test_uncached_hub_ids_never_download_and_say_how_to_get_them(offline_hub_cache, monkeypatch):
    """``models fetch NAME`` downloads a backend's default checkpoint, so only that one is sent there."""

    class WithDefault(EchoBackend):
        default_source = "someone/default-model"

    default = WithDefault()
    assert default.source == "someone/default-model"
    state = default.availability()
    assert not state.ok and "run `mmverify models fetch echo`" in state.reason
    other = WithDefault(source="someone/some-model")
    state = other.availability()
    assert not state.ok and "models fetch" not in state.reason
    assert "download it into the local Hugging Face cache, or point the backend at a local copy" in state.reason
    with pytest.raises(ModelUnavailable, match="someone/some-model is not in the local Hugging Face cache"):
        other.ensure_loaded()
    monkeypatch.setenv("MMVERIFY_ECHO_SOURCE", "someone/some-model")  # what `models fetch echo` would download
    assert "run `mmverify models fetch echo`" in other.availability().reason


def test_missing_packages_name_the_extra():
    class NeedsPackage(EchoBackend):
        packages = ("surely_not_an_installed_package",)

    state = NeedsPackage(source=".").availability()
    assert not state.ok and 'mmverify[models]' in state.reason


def test_checkpoint_digest_follows_content(tmp_path):
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    (folder / "w.bin").write_bytes(b"1" * 100)
    first = checkpoint_digest(folder)
    assert checkpoint_digest(folder) == first
    (folder / "w.bin").write_bytes(b"2" * 100)
    assert checkpoint_digest(folder) != first
    assert EchoBackend(source=str(folder)).fingerprint.startswith("echo:")


def test_source_from_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("MMVERIFY_ECHO_SOURCE", str(tmp_path))
    assert EchoBackend().source == str(tmp_path)
    with pytest.raises(ValueError):
        EchoBackend(batch_size=0)


def test_cache_round_trips_arrays_and_text(tmp_path):
    cache = OutputCache(tmp_path / "cache.sqlite")
    vector = np.arange(6, dtype=np.float32).reshape(2, 3)
    key = OutputCache.key("echo:abc", "embedding", array_digest(vector), crop="first10s")
    assert cache.get_array(key) is None and cache.misses == 1
    cache.put_array(key, "embedding", vector)
    np.testing.assert_array_equal(cache.get_array(key), vector)
    cache.put_text("t", "transcript", "héllo")
    assert cache.get_text("t") == "héllo" and cache.hits == 2 and len(cache) == 2
    assert OutputCache.key("echo:abc", "embedding", "x") != OutputCache.key("echo:abd", "embedding", "x")
    assert array_digest(vector) != array_digest(vector.astype(np.float64))


def _writer(path: str, worker: int) -> None:
    cache = OutputCache(path)
    for i in range(50):
        cache.put_text(f"{worker}-{i}", "transcript", f"text {worker} {i}")


def test_cache_is_safe_with_several_processes(tmp_path):
    path = str(tmp_path / "shared.sqlite")
    context = multiprocessing.get_context("spawn")
    processes = [context.Process(target=_writer, args=(path, w)) for w in range(3)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(60)
        assert process.exitcode == 0
    assert len(OutputCache(path)) == 150


def test_model_specs_and_hub_defaults():
    assert parse_spec("speaker=resemblyzer") == ("speaker", "resemblyzer", None)
    assert parse_spec("audio_text=clap-hf@/models/clap") == ("audio_text", "clap-hf", "/models/clap")
    assert parse_specs("speaker=resemblyzer, beat_tracker=librosa-beats") == {
        "speaker": ("resemblyzer", None),
        "beat_tracker": ("librosa-beats", None),
    }
    with pytest.raises(UnknownIdError, match="resemblyzer"):
        parse_spec("speaker=resemblizer")
    with pytest.raises(ValueError, match="provides"):
        parse_spec("speaker=silero-vad")
    with pytest.raises(ValueError):
        parse_spec("speaker")
    hub = ModelHub({"speaker": ("resemblyzer", None)})
    assert hub.choice("speaker") == ("resemblyzer", None)
    assert hub.choice("audio_text") == ("clap-hf", None)
    with pytest.raises(UnknownIdError):
        hub.choice("telepathy")


def test_caches_live_in_owner_only_folders(tmp_path):
    import stat

    OutputCache(tmp_path / "fresh" / "cache.sqlite")
    assert stat.S_IMODE((tmp_path / "fresh").stat().st_mode) == 0o700
