"""Speaker embeddings (WavLM x-vectors) and speaker gender (wav2vec2 classifier): clips per second
one clip per forward vs many, through mmverify's backends.

Runs with any Python that has torch and transformers (mmverify is imported from ./src).  It saves
random-init checkpoints -- small by default; ``--full`` for wavlm-base-sv's sizes and the wav2vec2
large classifier's -- writes nothing else, and embeds / classifies seeded synthetic 16 kHz clips
with the output cache off:

- *one by one*: a backend with batch shape 1, one call per clip;
- *batched*: a backend with batch shape ``--batch-size``, all clips in one call;

and checks that a clip embedded alone on the batched backend (padded to its batch shape) gives the
bytes it got inside the batch.  Timings are the best of ``--repeats``.

    python3 benchmarks/clip_models.py --clips 64
    python3 benchmarks/clip_models.py --full --device cuda --clips 1024 --batch-size 64 --precision bf16
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from batched_scoring import best_rate  # noqa: E402  (this folder: best of --repeats timings)
from mmverify.models.gender import Wav2Vec2Gender  # noqa: E402
from mmverify.models.speaker import WavLMSpeaker  # noqa: E402

SR = 16_000
# two narrow transformer layers over a narrow seven-layer conv encoder (its strides are the real ones)
NARROW = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 128, "conv_dim": (64,) * 7}


def save_with_extractor(model: Any, folder: Path) -> Path:
    from transformers import Wav2Vec2FeatureExtractor

    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    Wav2Vec2FeatureExtractor(feature_size=1, sampling_rate=SR, padding_value=0.0, do_normalize=True, return_attention_mask=True).save_pretrained(folder)
    return folder


def wavlm_xvector(folder: Path, full: bool) -> Path:
    """wavlm-base-sv's sizes (transformers' WavLMConfig defaults, group-norm feature encoder) with
    ``--full``; else a narrow two-layer one."""
    import torch
    from transformers import WavLMConfig, WavLMForXVector

    small = {} if full else {**NARROW, "tdnn_dim": (64, 64, 64, 64, 256)}
    torch.manual_seed(0)
    return save_with_extractor(WavLMForXVector(WavLMConfig(**small)).eval(), folder)


def wav2vec2_classifier(folder: Path, full: bool) -> Path:
    """The large wav2vec2 (XLSR-53) classifier's sizes with ``--full``; else a narrow two-layer one."""
    import torch
    from transformers import Wav2Vec2Config, Wav2Vec2ForSequenceClassification

    large = {"hidden_size": 1024, "num_hidden_layers": 24, "num_attention_heads": 16, "intermediate_size": 4096}
    sizes = large if full else NARROW
    config = Wav2Vec2Config(
        **sizes, feat_extract_norm="layer", do_stable_layer_norm=True, conv_bias=True, num_labels=2,
        id2label={0: "female", 1: "male"}, label2id={"female": 0, "male": 1},
    )  # fmt: skip
    torch.manual_seed(0)
    return save_with_extractor(Wav2Vec2ForSequenceClassification(config).eval(), folder)


def synth_clips(count: int, seconds: float) -> list[np.ndarray]:
    rng = np.random.default_rng(11)
    t = np.arange(int(seconds * SR)) / SR
    clips = []
    for _ in range(count):
        f0 = rng.uniform(90, 260)
        voiced = sum(np.sin(2 * np.pi * f0 * k * t) / k for k in range(1, 6)) * (0.5 + 0.5 * np.sin(2 * np.pi * rng.uniform(2, 5) * t))
        clips.append((0.2 * voiced + 0.01 * rng.standard_normal(t.size)).astype(np.float32))
    return clips


def measure(name: str, make: Callable[[int], Any], call: Callable[[Any, list[np.ndarray]], np.ndarray], clips: list[np.ndarray], args: argparse.Namespace) -> dict[str, Any]:
    single, batched = make(1), make(args.batch_size)
    call(single, clips[:1]), call(batched, clips[:1])  # loads outside the timing
    one_rate, one_rows = best_rate(lambda: np.concatenate([call(single, [clip]) for clip in clips]), len(clips), args.repeats)
    batch_rate, batch_rows = best_rate(lambda: call(batched, clips), len(clips), args.repeats)
    alone = np.concatenate([call(batched, [clip]) for clip in clips[: args.check]])
    return {
        "name": name, "one": one_rate, "batched": batch_rate, "identical": alone.tobytes() == batch_rows[: args.check].tobytes(),
        "max_delta": float(np.abs(one_rows - batch_rows).max()),
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clips", type=int, default=64)
    parser.add_argument("--clip-seconds", type=float, default=5.0)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--precision", default="fp32", choices=("fp32", "bf16", "fp16"))
    parser.add_argument("--full", action="store_true", help="wavlm-base-sv and wav2vec2-large sizes")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--check", type=int, default=8, help="clips embedded alone on the batched backend, for the identity check")
    args = parser.parse_args()

    from mmverify.envfix import install_torchvision_op_stubs

    install_torchvision_op_stubs()  # lets transformers import where torchvision's compiled ops cannot load
    clips = synth_clips(args.clips, args.clip_seconds)
    with tempfile.TemporaryDirectory() as tmp:
        speaker, gender = wavlm_xvector(Path(tmp) / "wavlm", args.full), wav2vec2_classifier(Path(tmp) / "gender", args.full)

        def backend(cls: Any, folder: Path) -> Callable[[int], Any]:
            return lambda shape: cls(source=str(folder), device=args.device, batch_size=shape, precision=args.precision)

        def probabilities(model: Any, batch: list[np.ndarray]) -> np.ndarray:
            return np.array([[row[label] for label in model.labels] for row in model.classify(batch)], dtype=np.float32)

        results = [
            measure("speaker (WavLM x-vector)", backend(WavLMSpeaker, speaker), lambda m, batch: m.embed(batch), clips, args),
            measure("gender (wav2vec2)", backend(Wav2Vec2Gender, gender), probabilities, clips, args),
        ]
    size = "full-size" if args.full else "small"
    print(f"{args.clips} clips of {args.clip_seconds:g} s, {size} random-init models on {args.device}, {args.precision}, "
          f"batch shape {args.batch_size}, best of {args.repeats}")  # fmt: skip
    print(f"{'backend':28} {'one by one':>14} {'batched':>14} {'speed-up':>9}  alone = in batch  max |delta| vs batch shape 1")
    for r in results:
        print(
            f"{r['name']:28} {r['one']:8.1f} clip/s {r['batched']:8.1f} clip/s {r['batched'] / r['one']:8.2f}x  "
            f"{'yes' if r['identical'] else 'NO':>16}  {r['max_delta']:.2g}"
        )


if __name__ == "__main__":
    main()
