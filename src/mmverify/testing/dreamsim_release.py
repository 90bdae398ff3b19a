"""Random-init DreamSim weights in the layout of dreamsim's releases, for tests and benchmarks.

A release folder holds the backbone files (``*_pretrain.pth*``) and the LoRA adapter folder; a
type with a DINO backbone also needs torch.hub's copy of the DINO repository and its weights, as a
first build leaves them.  :func:`write_release` writes all of it, nothing downloaded.

dreamsim builds ViT-B backbones (``vit_base``).  ``width=None`` keeps those real sizes; a width
gives narrow ViTs of the same class, cheap on a CPU -- then dreamsim must build that narrow ViT
when it loads the folder too: load inside :func:`narrow_backbones`.  The DINO repository's
stand-in ``hubconf.py`` builds the same ViT.
"""

from __future__ import annotations

import functools
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from ..models.dreamsim import torch_hub_offline

CLIP_PROJECTION = 512  # the width of dreamsim's CLIP/OpenCLIP embeddings
NARROW_CLIP_DEPTH = 2

_HUBCONF = """
import torch
from mmverify.testing.dreamsim_release import vit


def dino_vitb16(pretrained=True, **kwargs):
    model = vit({width!r}, patch_size=16)
    if pretrained:
        url = "https://dl.fbaipublicfiles.com/dino/dino_vitbase16_pretrain/dino_vitbase16_pretrain.pth"
        model.load_state_dict(torch.hub.load_state_dict_from_url(url, map_location="cpu"))
    return model
"""


def vit(width: int | None, patch_size: int = 16, depth: int = 12, **kwargs: Any) -> Any:
    """dreamsim's ViT-B (``width=None``), or a narrow ViT of the same class (DINO's needs all 12
    blocks: dreamsim reads block 11)."""
    import torch
    from dreamsim.feature_extraction.vision_transformer import VisionTransformer, vit_base

    if width is None:
        return vit_base(patch_size=patch_size, **kwargs)
    norm = functools.partial(torch.nn.LayerNorm, eps=1e-6)
    return VisionTransformer(
        patch_size=patch_size, embed_dim=width, depth=depth, num_heads=2, mlp_ratio=2, qkv_bias=True, norm_layer=norm, **kwargs
    )


def clip_vit(width: int | None, patch_size: int = 16, **kwargs: Any) -> Any:
    """A CLIP/OpenCLIP backbone: ViT-B, or a narrow two-block one (only its embedding is read)."""
    return vit(width, patch_size=patch_size, depth=NARROW_CLIP_DEPTH, **kwargs)


@contextmanager
def narrow_backbones(width: int | None) -> Iterator[None]:
    """Inside, dreamsim builds its CLIP/OpenCLIP backbones ``width`` wide (None: leaves them alone)."""
    if width is None:
        yield
        return
    import dreamsim.feature_extraction.load_clip_as_dino as clip_as_dino
    import dreamsim.feature_extraction.load_open_clip_as_dino as open_clip_as_dino

    saved = clip_as_dino.vit_base, open_clip_as_dino.vit_base
    narrow = functools.partial(clip_vit, width)
    clip_as_dino.vit_base = open_clip_as_dino.vit_base = narrow
    try:
        yield
    finally:
        clip_as_dino.vit_base, open_clip_as_dino.vit_base = saved


def _save_clip_backbone(path: Path, width: int | None, patch_size: int) -> None:
    """A CLIP/OpenCLIP-as-DINO backbone file: ViT state dict (with the pre-norm) + ``proj``."""
    import torch

    model = clip_vit(width, patch_size=patch_size)
    size = model.embed_dim
    model.pos_drop = torch.nn.LayerNorm(size)  # dreamsim's CLIP-as-DINO layout has a pre-norm here
    state = dict(model.state_dict())
    state["proj"] = torch.randn(size, CLIP_PROJECTION) / size**0.5
    torch.save({"state_dict": state}, path)


def _save_lora(model: Any, folder: Path) -> None:
    import torch
    from peft import LoraConfig, get_peft_model

    lora = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, bias="none", target_modules=["qkv"]))
    with torch.no_grad():  # peft starts LoRA at zero; make the adapter matter
        for name, param in lora.named_parameters():
            if "lora_B" in name:
                param.normal_(0.0, 0.05)
    lora.save_pretrained(str(folder))


def write_release(folder: Path, dreamsim_type: str = "open_clip_vitb32", width: int | None = None, seed: int = 0) -> Path:
    """Random weights of ``dreamsim_type`` (``open_clip_vitb32`` or ``ensemble``) in ``folder``;
    returns it.  With a ``width``, load it inside :func:`narrow_backbones` of that width."""
    import torch
    from dreamsim.config import dreamsim_args
    from dreamsim.model import PerceptualModel

    folder.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed)
    with narrow_backbones(width):
        if dreamsim_type == "open_clip_vitb32":
            _save_clip_backbone(folder / "open_clip_vitb32_pretrain.pth.tar", width, 32)
            model = PerceptualModel(
                model_type="open_clip_vitb32", feat_type="embedding", stride="32", lora=True, load_dir=str(folder), device="cpu"
            )
            _save_lora(model, folder / "open_clip_vitb32_single_lora")
            return folder
        if dreamsim_type != "ensemble":
            raise ValueError(f"write_release builds open_clip_vitb32 or ensemble, not {dreamsim_type!r}")
        _save_clip_backbone(folder / "clip_vitb16_pretrain.pth.tar", width, 16)
        _save_clip_backbone(folder / "open_clip_vitb16_pretrain.pth.tar", width, 16)
        head = {
            f"module.head.mlp.{i}.{kind}": torch.randn(4, 4) if kind == "weight" else torch.randn(4)
            for i in (0, 2, 4) for kind in ("weight", "bias")
        }  # fmt: skip  (dreamsim builds DINO's head but never uses it)
        torch.save({"student": {**head, "module.head.last_layer.weight": torch.randn(4, 4)}}, folder / "dino_vitb16_pretrain.pth")
        repo = folder / "facebookresearch_dino_main"
        repo.mkdir(exist_ok=True)
        (repo / "hubconf.py").write_text(_HUBCONF.format(width=width))
        (folder / "checkpoints").mkdir(exist_ok=True)
        torch.save(vit(width, patch_size=16).state_dict(), folder / "checkpoints" / "dino_vitbase16_pretrain.pth")
        with torch_hub_offline():
            model = PerceptualModel(**dreamsim_args["model_config"]["ensemble"], load_dir=str(folder), device="cpu")
        _save_lora(model, folder / "ensemble_lora")
    return folder
