"""DreamSim through ``dreamsim.dreamsim()`` with a tiny random-init checkpoint.

The checkpoint folders have the layout of dreamsim's releases (backbone ``*_pretrain.pth*`` files +
LoRA adapter folder; for the ensemble also torch.hub's copy of the DINO repository and weights),
written by :mod:`mmverify.testing.dreamsim_release` with narrow ViTs of dreamsim's own class, which
dreamsim is made to build in place of ViT-B; the DINO "repository" is a stand-in ``hubconf.py``
building such a ViT.  Everything else -- dreamsim's cache check, PerceptualModel, ViTExtractor,
torch.hub loading from its cache, ``weights_only`` backbone loading, peft LoRA loading,
preprocessing, normalisation, cosine distance -- is dreamsim's and torch's own code.
"""

from __future__ import annotations

import urllib.error
from pathlib import Path
from typing import Iterator

import numpy as np
import pytest

from mmverify.models.base import ModelUnavailable
from mmverify.models.protocols import ImageSimilarity

from mmverify.envfix import install_torchvision_op_stubs  # noqa: E402

install_torchvision_op_stubs()  # before anything imports torchvision (dreamsim does)
pytest.importorskip("dreamsim")

from mmverify.models.dreamsim import DreamSimBackend, parse_source, required_files, torch_hub_offline  # noqa: E402
from mmverify.testing.dreamsim_release import narrow_backbones, write_release  # noqa: E402

WIDTH = 32  # narrow backbones (see mmverify.testing.dreamsim_release)


@pytest.fixture(scope="module")
def weights(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    with narrow_backbones(WIDTH):  # dreamsim builds the narrow backbones while the module's tests load them
        yield write_release(tmp_path_factory.mktemp("dreamsim"), "open_clip_vitb32", WIDTH)


@pytest.fixture(scope="module")
def backend(weights: Path) -> DreamSimBackend:
    model = DreamSimBackend(source=f"open_clip_vitb32@{weights}", device="cpu", batch_size=4)
    model.ensure_loaded()
    return model


def images(n: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, (90 + 13 * i, 120 + 7 * i, 3), dtype=np.uint8) for i in range(n)]


def test_identical_images(backend: DreamSimBackend) -> None:
    assert isinstance(backend, ImageSimilarity)
    pics = images(3)
    for score in backend.similarity([(p, p.copy()) for p in pics]):
        assert abs(score - 1.0) <= 1e-5


def test_batched_equals_unbatched_and_deterministic(backend: DreamSimBackend, weights: Path) -> None:
    pics = images(7, seed=1)
    pairs = [(pics[i], pics[(i + 1) % 7]) for i in range(7)]  # 7 pairs: batches of 4 + 3
    batched = backend.similarity(pairs)
    single = [backend.similarity([pair])[0] for pair in pairs]
    np.testing.assert_allclose(batched, single, atol=1e-5)
    assert all(0.0 <= s < 1.0 for s in batched) and len(set(round(s, 4) for s in batched)) > 1
    assert backend.similarity(pairs) == batched
    reloaded = DreamSimBackend(source=f"open_clip_vitb32@{weights}", device="cpu", batch_size=4)
    assert reloaded.similarity(pairs) == batched


def test_preprocessing_is_dreamsims(backend: DreamSimBackend) -> None:
    """RGB conversion and the 224x224 resize: grey, RGBA and RGB versions of one picture agree."""
    pic = images(1, seed=2)[0]
    grey = pic.mean(axis=2).astype(np.uint8)
    rgba = np.dstack([pic, np.full(pic.shape[:2], 255, np.uint8)])
    from PIL import Image

    tensor = backend._preprocess(Image.fromarray(pic))
    assert tuple(tensor.shape) == (1, 3, 224, 224) and 0.0 <= float(tensor.min()) and float(tensor.max()) <= 1.0
    same = backend.similarity([(rgba, pic), (np.dstack([grey] * 3), grey)])
    assert all(abs(s - 1.0) <= 1e-5 for s in same)
    assert backend.similarity([]) == []
    with pytest.raises(ValueError):
        backend.similarity([(pic.astype(np.float32), pic)])


def test_lora_adapter_is_loaded(backend: DreamSimBackend, weights: Path) -> None:
    from safetensors.torch import load_file

    saved = load_file(str(weights / "open_clip_vitb32_single_lora" / "adapter_model.safetensors"))
    loaded = {name: p for name, p in backend._model.named_parameters() if "lora_B" in name}
    assert saved and loaded
    key = next(k for k in saved if "blocks.0.attn.qkv.lora_B" in k)
    match = next(p for name, p in loaded.items() if "blocks.0.attn.qkv.lora_B" in name)
    np.testing.assert_array_equal(saved[key].numpy(), match.detach().numpy())


def test_fingerprint(backend: DreamSimBackend, weights: Path) -> None:
    assert backend.fingerprint.startswith("dreamsim:open_clip_vitb32:")
    same = DreamSimBackend(source=f"open_clip_vitb32@{weights}", batch_size=backend.batch_size)
    assert same.fingerprint == backend.fingerprint
    # outputs depend on the batch shape and the device type
    assert backend.fingerprint.endswith(f";rows={backend.batch_size};row=content;device={backend.device_type}")


@pytest.mark.filterwarnings("ignore:`torch.nn.utils.weight_norm` is deprecated:FutureWarning")
def test_ensemble_builds_offline_from_its_folder(tmp_path: Path) -> None:
    """The default type: DINO comes through torch.hub's cache with the network refused."""
    with narrow_backbones(WIDTH):
        write_release(tmp_path, "ensemble", WIDTH, seed=1)
        backend = DreamSimBackend(source=str(tmp_path), device="cpu")
        assert backend.dreamsim_type == "ensemble" and backend.availability().ok
        pics = images(3, seed=3)
        scores = backend.similarity([(pics[0], pics[0].copy()), (pics[0], pics[1]), (pics[1], pics[2])])
    assert abs(scores[0] - 1.0) <= 1e-5 and all(0.0 <= s < 1.0 for s in scores[1:])
    assert len(backend._model.base_model.model.extractor_list) == 3


def test_sources_and_offline_messages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MMVERIFY_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("MMVERIFY_DREAMSIM_SOURCE", raising=False)
    assert parse_source(None) == ("ensemble", tmp_path / "cache" / "dreamsim")
    assert parse_source("dino_vitb16") == ("dino_vitb16", tmp_path / "cache" / "dreamsim")
    assert parse_source(str(tmp_path)) == ("ensemble", tmp_path)
    assert parse_source(f"clip_vitb32@{tmp_path}/w") == ("clip_vitb32", tmp_path / "w")
    with pytest.raises(ValueError):
        parse_source("nonsense")
    with pytest.raises(ValueError):
        parse_source("vit_huge@/x")

    default = DreamSimBackend()
    available = default.availability()
    assert not available.ok
    assert "mmverify models fetch dreamsim" in available.reason and "MMVERIFY_DREAMSIM_SOURCE" in available.reason
    with pytest.raises(ModelUnavailable, match="ensemble_lora"):
        default.ensure_loaded()
    # the release files alone are not enough for DINO backbones: torch.hub's copy must be there too
    folder = tmp_path / "partial"
    for name in required_files("ensemble"):
        if not name.startswith(("facebookresearch_", "checkpoints/")):
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_bytes(b"")
    reason = DreamSimBackend(source=str(folder)).availability().reason
    assert "facebookresearch_dino_main" in reason and "dino_vitbase16_pretrain.pth" in reason
    assert not DreamSimBackend(source="nonsense").availability().ok


def test_torch_hub_network_is_refused_while_loading(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    import torch.hub

    reached: list[object] = []  # offline, a real request fails too: what counts is that none is made

    def no_network(*args: object, **_kwargs: object) -> None:
        reached.append(args)
        raise OSError("the test refuses the network")

    monkeypatch.setattr(socket, "getaddrinfo", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    monkeypatch.setattr(socket.socket, "connect", no_network)
    before = torch.hub.get_dir()
    with torch_hub_offline():
        torch.hub.set_dir(str(tmp_path))  # what dreamsim does
        with pytest.raises(urllib.error.URLError, match="network access is disabled"):
            torch.hub.load_state_dict_from_url("https://example.invalid/weights.pth", model_dir=str(tmp_path))
        with pytest.raises((urllib.error.URLError, RuntimeError)):  # torch.hub words the refusal its own way
            torch.hub.load("facebookresearch/dinov2", "dinov2_vitb14")
    assert reached == []
    assert torch.hub.get_dir() == before
