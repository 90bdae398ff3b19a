"""Whisper front end: transformers' WhisperFeatureExtractor vs mmverify's torch log-mel.

Runs with any Python that has torch and transformers (mmverify is imported from ./src).  Makes
seeded synthetic clips (10 s by default, so zero padding fills two thirds of Whisper's 30 s
window) and prints clips per second of:

- the extractor as ``HFWhisper(features="numpy")`` calls it: numpy padding on the CPU, then its own
  float32 torch STFT on the CPU (transformers takes that path whenever torch is installed), then
  a copy of the features to ``--device``;
- the extractor's pure-numpy spectrogram (its fallback without torch), on the padded clips;
- the torch front end (:mod:`mmverify.models.whisper_features`) from clips to features on
  ``--device``, as ``HFWhisper(features="torch")`` calls it.

Timings are the best of ``--repeats`` runs after a warm-up; the rows also show clips per second of
process CPU time, steadier than wall time when other jobs share the machine.  ``--threads`` sets
torch's CPU threads.

    python3 benchmarks/whisper_frontend.py --clips 16 --device cpu
    python3 benchmarks/whisper_frontend.py --clips 512 --device cuda --batch-size 64 --mels 128
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from mmverify.models.whisper_features import WhisperMelFeatures  # noqa: E402
from throughput import in_batches, measure  # noqa: E402  (benchmarks/throughput.py)

SR = 16_000


def synth_clips(count: int, seconds: float, seed: int = 0) -> list[np.ndarray]:
    """Gliding harmonic tones with a syllable-rate envelope and a little noise; one per clip."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * SR)) / SR
    clips = []
    for _ in range(count):
        pitch = rng.uniform(90, 300) * (1 + 0.2 * np.sin(2 * np.pi * rng.uniform(0.5, 3) * t))
        phase = 2 * np.pi * np.cumsum(pitch) / SR
        tone = sum(np.sin(k * phase) / k for k in range(1, 6))
        envelope = np.abs(np.sin(np.pi * t * rng.uniform(2, 5)))
        clips.append((0.2 * envelope * tone + 0.01 * rng.standard_normal(t.size)).astype(np.float32))
    return clips


def padded(clips: list[np.ndarray], samples: int) -> np.ndarray:
    """``(len(clips), samples)`` float32: each clip truncated and zero-padded to the window."""
    out = np.zeros((len(clips), samples), dtype=np.float32)
    for row, clip in zip(out, clips):
        row[: min(clip.size, samples)] = clip[:samples]
    return out


def main() -> None:
    import torch
    from transformers import WhisperFeatureExtractor

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clips", type=int, default=16, help="synthetic clips per measurement")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of every clip")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--batch-size", type=int, default=8, help="clips per call (HFWhisper's batch_size)")
    parser.add_argument("--mels", type=int, default=80, choices=(80, 128), help="mel bins (large-v3: 128)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's own choice)")
    parser.add_argument("--numpy-clips", type=int, default=8, help="at most this many clips through the pure-numpy path")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    extractor = WhisperFeatureExtractor(feature_size=args.mels)
    mel = WhisperMelFeatures.from_extractor(extractor)
    clips = synth_clips(args.clips, args.seconds)
    batches = in_batches(clips, args.batch_size)
    few = padded(clips[: args.numpy_clips], extractor.n_samples)
    device = args.device
    name = torch.cuda.get_device_name() if device.startswith("cuda") else "CPU"
    print(f"{name}, {torch.get_num_threads()} torch threads; {args.clips} clips of {args.seconds:g} s, {args.mels} mels, "
          f"batch {args.batch_size}; best of {args.repeats}")

    def through_extractor() -> None:
        for batch in batches:
            extractor(batch, sampling_rate=SR, return_tensors="pt").input_features.to(device)

    def through_numpy_path() -> None:
        extractor._np_extract_fbank_features(few, "cpu")

    def through_torch() -> None:
        for batch in batches:
            mel(batch, device=device)

    with torch.inference_mode():
        reference = measure(through_extractor, len(clips), device, args.repeats)
        numpy_path = measure(through_numpy_path, len(few), "cpu", args.repeats)
        ours = measure(through_torch, len(clips), device, args.repeats)
    print(f"{'WhisperFeatureExtractor (CPU torch STFT, as called)':<56} {reference}")
    print(f"{'WhisperFeatureExtractor numpy path (CPU, ' + str(len(few)) + ' clips)':<56} {numpy_path}")
    print(f"{'torch front end (' + device + ')':<56} {ours}   "
          f"{ours.wall / reference.wall:5.2f}x the extractor, {ours.wall / numpy_path.wall:5.2f}x its numpy path")


if __name__ == "__main__":
    main()
