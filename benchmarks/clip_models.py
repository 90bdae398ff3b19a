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
from mmverify.testing.speech_models import build_wav2vec2_gender, build_wavlm_xvector, voiced_clips  # noqa: E402

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
    parser.add_argument("--rows", default="auto", choices=("auto", "content", "packed"), help="where inputs sit in a batch (auto: by content on a CPU)")
    parser.add_argument("--check", type=int, default=8, help="clips embedded alone on the batched backend, for the identity check")
    args = parser.parse_args()

    from mmverify.envfix import install_torchvision_op_stubs

    install_torchvision_op_stubs()  # lets transformers import where torchvision's compiled ops cannot load
    clips = voiced_clips(args.clips, args.clip_seconds)
    with tempfile.TemporaryDirectory() as tmp:
        speaker, gender = build_wavlm_xvector(Path(tmp) / "wavlm", args.full), build_wav2vec2_gender(Path(tmp) / "gender", args.full)

        def backend(cls: Any, folder: Path) -> Callable[[int], Any]:
            return lambda shape: cls(source=str(folder), device=args.device, batch_size=shape, precision=args.precision, rows=args.rows)

        def probabilities(model: Any, batch: list[np.ndarray]) -> np.ndarray:
            return np.array([[row[label] for label in model.labels] for row in model.classify(batch)], dtype=np.float32)

        results = [
            measure("speaker (WavLM x-vector)", backend(WavLMSpeaker, speaker), lambda m, batch: m.embed(batch), clips, args),
            measure("gender (wav2vec2)", backend(Wav2Vec2Gender, gender), probabilities, clips, args),
        ]
    size = "full-size" if args.full else "small"
    print(f"{args.clips} clips of {args.clip_seconds:g} s, {size} random-init models on {args.device}, {args.precision}, "
          f"batch shape {args.batch_size}, rows {args.rows}, best of {args.repeats}")  # fmt: skip
    print(f"{'backend':28} {'one by one':>14} {'batched':>14} {'speed-up':>9}  alone = in batch  max |delta| vs batch shape 1")
    for r in results:
        print(
            f"{r['name']:28} {r['one']:8.1f} clip/s {r['batched']:8.1f} clip/s {r['batched'] / r['one']:8.2f}x  "
            f"{'yes' if r['identical'] else 'NO':>16}  {r['max_delta']:.2g}"
        )


if __name__ == "__main__":
    main()
