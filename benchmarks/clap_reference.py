"""CLAP reference scoring: embedding index vs reloading CLAP and re-encoding references per clip.

MMMG scores a generated sound by the mean of its top-10 CLAP cosine similarities against every
reference clip of the target class.  The published pipeline reloads CLAP and re-encodes all
references for each generated clip; mmverify embeds the references once into an index and then
needs one embedding and one matrix product per clip.

Both approaches use the same random-init ClapModel with the default (htsat-unfused sized, ~153 M
parameters) configuration and the real feature-extractor settings, saved to a temporary folder;
all clips are 44.1 kHz WAV files decoded and resampled to 48 kHz, as ESC-50 references are.

    .venv/bin/python benchmarks/clap_reference.py [--clips 10] [--refs 40] [--seconds 5]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import soundfile as sf

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from mmverify.core.media import load_audio  # noqa: E402
from mmverify.models.clap_hf import HFClap  # noqa: E402
from mmverify.references import ReferenceIndex  # noqa: E402

FILE_SR = 44_100
TOP_K = 10


def save_random_clap(folder: Path, seed: int = 0) -> int:
    """A default-size random-init CLAP checkpoint with the unfused checkpoint's preprocessing."""
    from mmverify.envfix import install_torchvision_op_stubs

    install_torchvision_op_stubs()
    import torch
    from tokenizers.pre_tokenizers import ByteLevel
    from transformers import ClapConfig, ClapFeatureExtractor, ClapModel, ClapProcessor, RobertaTokenizer

    vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3, "<mask>": 4}
    for symbol in sorted(ByteLevel.alphabet()):
        vocab[symbol] = len(vocab)
    torch.manual_seed(seed)
    model = ClapModel(ClapConfig()).eval()
    extractor = ClapFeatureExtractor(
        feature_size=64, sampling_rate=48_000, hop_length=480, max_length_s=10, fft_window_size=1024,
        frequency_min=50, frequency_max=14_000, truncation="rand_trunc", padding="repeatpad",
    )
    model.save_pretrained(folder)
    ClapProcessor(feature_extractor=extractor, tokenizer=RobertaTokenizer(vocab=vocab, merges=[])).save_pretrained(folder)
    return sum(p.numel() for p in model.parameters())


def synth(seconds: float, seed: int) -> np.ndarray:
    """A harmonic tone with vibrato, an amplitude envelope and noise (different per seed)."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * FILE_SR)) / FILE_SR
    f0 = rng.uniform(120, 900)
    phase = 2 * np.pi * f0 * t + rng.uniform(1, 8) * np.sin(2 * np.pi * rng.uniform(2, 7) * t)
    harmonics = sum(np.sin(k * phase) / k for k in range(1, 5))
    envelope = np.abs(np.sin(np.pi * t * rng.uniform(0.5, 3)))
    return (0.3 * envelope * harmonics + 0.03 * rng.standard_normal(t.size)).astype(np.float32)


def write_clips(folder: Path, count: int, seconds: float, seed: int) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(count):
        path = folder / f"{i:03d}.wav"
        sf.write(path, synth(seconds, seed + i), FILE_SR)
        paths.append(path)
    return paths


def topk_mean(query: np.ndarray, refs: np.ndarray, k: int = TOP_K) -> float:
    sims = np.sort(refs.astype(np.float64) @ query.astype(np.float64))[::-1]
    return float(sims[:k].mean())


class Span:
    def __init__(self, wall: float, cpu: float) -> None:
        self.wall, self.cpu = wall, cpu

    def ratio(self, other: "Span") -> str:
        return f"{self.wall / other.wall:.1f}x wall ({self.cpu / other.cpu:.1f}x CPU)"

    def __str__(self) -> str:
        return f"{self.wall:.3f} s ({self.cpu:.3f} s)"


class Clock:
    """Wall and process CPU time: CPU time is steadier when other jobs share the machine."""

    def __init__(self) -> None:
        self._wall, self._cpu = time.perf_counter(), time.process_time()

    def lap(self, per: int = 1) -> Span:
        wall, cpu = time.perf_counter(), time.process_time()
        span = Span((wall - self._wall) / per, (cpu - self._cpu) / per)
        self._wall, self._cpu = wall, cpu
        return span


def torch_threads() -> int:
    import torch

    return torch.get_num_threads()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clips", type=int, default=10, help="generated clips to score")
    parser.add_argument("--refs", type=int, default=40, help="reference clips in the class")
    parser.add_argument("--seconds", type=float, default=5.0, help="length of every clip")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--device", default=None, help="cpu, cuda, mps (default: best available)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="clap-bench-") as tmp:
        work = Path(tmp)
        start = time.perf_counter()
        params = save_random_clap(work / "clap")
        print(f"random-init ClapModel: {params / 1e6:.1f} M parameters, saved in {time.perf_counter() - start:.1f} s")
        refs = write_clips(work / "refs" / "target", args.refs, args.seconds, seed=1000)
        generated = write_clips(work / "generated", args.clips, args.seconds, seed=0)
        source = str(work / "clap")

        # (a) index: load once, embed the references once, then one embedding + one product per clip.
        clock = Clock()
        clap = HFClap(source=source, device=args.device, batch_size=args.batch_size)
        clap.ensure_loaded()
        index = ReferenceIndex.build("gtzan", work / "refs", clap, work / "index")
        setup_a = clock.lap()
        scores_a = []
        for path in generated:
            embedding = clap.embed_audio([load_audio(path, sample_rate=clap.sample_rate)[0]])[0]
            scores_a.append(index.topk_mean(embedding, "target", k=TOP_K))
        per_clip_a = clock.lap(len(generated))

        # (a, batched) the same index; the generated clips embedded in batches, one (N x refs) product.
        audio = [load_audio(path, sample_rate=clap.sample_rate)[0] for path in generated]
        scores_batched = index.topk_mean_batch(clap.embed_audio(audio), "target", k=TOP_K)
        per_clip_batched = clock.lap(len(generated))

        # (b) published: per clip, reload CLAP from the folder and re-encode every reference and the clip.
        scores_b = []
        for path in generated:
            fresh = HFClap(source=source, device=args.device, batch_size=args.batch_size)
            ref_rows = fresh.embed_audio([load_audio(p, sample_rate=fresh.sample_rate)[0] for p in refs])
            query = fresh.embed_audio([load_audio(path, sample_rate=fresh.sample_rate)[0]])[0]
            scores_b.append(topk_mean(query, ref_rows))
            del fresh
        per_clip_b = clock.lap(len(generated))

        # Embedding throughput alone (in-memory 48 kHz clips, batched).
        clips48 = [load_audio(p, sample_rate=clap.sample_rate)[0] for p in refs[: max(args.batch_size * 2, 8)]]
        clap.embed_audio(clips48[: args.batch_size])  # warm-up
        clock.lap()
        clap.embed_audio(clips48)
        embed_only = clock.lap(len(clips48))

    delta = max(
        float(np.max(np.abs(np.array(scores_a) - np.array(scores_b)))),
        float(np.max(np.abs(scores_batched - np.array(scores_b)))),
    )
    print(f"device: {clap.device}; {args.clips} generated clips x {args.refs} references, {args.seconds:g} s each, top-{TOP_K}")
    print("seconds per clip, wall (process CPU):")
    print(f"(a) index, one clip at a time: {per_clip_a}   [setup once: {setup_a} = load + embed {args.refs} refs]")
    print(f"(a) index, clips batched:      {per_clip_batched}")
    print(f"(b) published:                 {per_clip_b}   (reload + re-encode {args.refs} refs + clip)")
    print(f"speed-up (b)/(a) one at a time: {per_clip_b.ratio(per_clip_a)}")
    print(f"speed-up (b)/(a) batched:       {per_clip_b.ratio(per_clip_batched)}")
    print(f"scores: max |delta| vs (b) = {delta:.2e}  (a: {np.round(scores_a, 4).tolist()})")
    print(f"HFClap embedding alone: {1 / embed_only.wall:.2f} clips/s wall, {1 / embed_only.cpu:.2f} clips per CPU-second "
          f"({args.seconds:g} s clips, batch {args.batch_size}, {torch_threads()} torch threads)")


if __name__ == "__main__":
    main()
