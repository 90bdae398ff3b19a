"""End-to-end items per second, scored one by one vs together (model calls batched across items).

Runs with any Python that has torch, transformers and soundfile (mmverify is imported from ./src).
It saves random-init checkpoints (tiny by default; ``--full`` for CLAP's default sizes and a
Whisper with large-v3's sizes), writes seeded synthetic clips and an ESC-50-style reference set,
and scores two tasks through the Reward API, in this process, with the output cache off:

- ``a_sound_cot`` (CLAP: the whole clip against its class's references), and
- ``a_speech_translate`` (Whisper: transcript BLEU; the decode length is fixed by ``--max-new-tokens``).

For each it prints items/s of three ways to score:

- *before*: one item at a time with the checkpoint's numpy feature extractor (``features=numpy``),
  the way every task scored before batch-first scoring;
- *one by one*: ``in_flight=1`` with the torch front-end;
- *together*: ``in_flight=N``, N items scored at once, their forwards merged into batches;

the speed-ups of together over both, whether together's rows are byte-identical to one-by-one
scoring at the same batch shape, and together's share of the backend's own batched throughput
(the same clips, decoded and resampled beforehand, through the backend alone at ``--batch-size``).
``--baseline-items`` times the two slow ways on the first N items only (a rate per item either way).  Before and one by one run at batch shape 1 (nothing padded: the
fastest way to score single items); together at ``--batch-size``, with ``--rows`` placing the
inputs in a batch (by content: each in the row its content picks, so rows are the same bytes
however items are grouped; packed: every row used; auto: by content on a CPU).  Timings are the
best of ``--repeats``.

    python3 benchmarks/batched_scoring.py --items 64 --in-flight 32
    python3 benchmarks/batched_scoring.py --full --device cuda --items 2048 --in-flight 256 --batch-size 128
"""

from __future__ import annotations

import argparse
import csv
import functools
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from mmverify.pipelines.reward import Reward  # noqa: E402
from mmverify.testing.tiny_models import build_tiny_clap, build_tiny_hf_whisper  # noqa: E402

FILE_SR = 22_050
CLASSES = ("dog", "rain", "siren", "church bells")
SENTENCE = "the cat sat on the mat"
WorkerSetting = tuple[int, bool, int]  # worker processes, whether a model process serves them, decoding processes of each


def worker_settings(text: str) -> list[WorkerSetting]:
    """``4,4m,8m,4m:2``: 4 workers, 4 and 8 workers with a model process, then 4 with a model
    process and 2 decoding processes each (``:K`` alone on N = 1 is ``--decode-processes``'s)."""
    settings = []
    for part in filter(None, text.split(",")):
        workers, _, decoding = part.partition(":")
        count, served = (workers[:-1], True) if workers.endswith("m") else (workers, False)
        if not count.isdigit() or int(count) < 1 or (served and int(count) < 2) or not (decoding or "0").isdigit():
            raise argparse.ArgumentTypeError(f"{part!r} is not N (N >= 1) or Nm (N >= 2), optionally with :K decoding processes each")
        settings.append((int(count), served, int(decoding or 0)))
    return settings


def setting_name(setting: WorkerSetting) -> str:
    workers, served, decoding = setting
    return f"--workers {workers}" + (" --model-process" if served else "") + (f" --decode-processes {decoding}" if decoding else "")


def synth(seconds: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * FILE_SR)) / FILE_SR
    tone = np.sin(2 * np.pi * rng.uniform(150, 900) * t) * np.abs(np.sin(np.pi * t * rng.uniform(0.5, 3)))
    return (0.3 * tone + 0.03 * rng.standard_normal(t.size)).astype(np.float32)


def write_clips(folder: Path, count: int, seconds: float, seed: int) -> list[Path]:
    import soundfile as sf

    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / f"{i:04d}.wav" for i in range(count)]
    for i, path in enumerate(paths):
        sf.write(path, synth(seconds, seed + i), FILE_SR)
    return paths


def cycled(paths: list[Path], count: int) -> list[Path]:
    """``count`` paths, ``paths`` over and over."""
    return [paths[i % len(paths)] for i in range(count)]


def esc50_references(root: Path, per_class: int) -> Path:
    """An ESC-50 layout (meta/esc50.csv + audio/) with ``per_class`` synthetic clips per class."""
    import soundfile as sf

    (root / "audio").mkdir(parents=True, exist_ok=True)
    (root / "meta").mkdir(exist_ok=True)
    with open(root / "meta" / "esc50.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["filename", "fold", "target", "category", "esc10", "src_file", "take"])
        for target, category in enumerate(CLASSES):
            for i in range(per_class):
                name = f"1-{target}{i:03d}-A-{target}.wav"
                sf.write(root / "audio" / name, synth(5.0, 1000 * (target + 1) + i), 44_100)
                writer.writerow([name, 1, target, category, False, f"{target}{i:03d}", "A"])
    return root


def full_size_clap(folder: Path) -> Path:
    import torch
    from transformers import ClapConfig, ClapModel, ClapProcessor

    tiny = build_tiny_clap(folder / "tiny")  # its tokenizer, with the unfused checkpoint's extractor settings
    processor = ClapProcessor.from_pretrained(tiny)
    processor.feature_extractor.feature_size, processor.feature_extractor.hop_length = 64, 480
    torch.manual_seed(0)
    ClapModel(ClapConfig()).eval().save_pretrained(folder / "full")
    processor.save_pretrained(folder / "full")
    return folder / "full"


def full_size_whisper(folder: Path) -> Path:
    import torch
    from transformers import WhisperConfig, WhisperForConditionalGeneration, WhisperProcessor

    tiny = build_tiny_hf_whisper(folder / "tiny")
    small = WhisperForConditionalGeneration.from_pretrained(tiny)
    config = WhisperConfig(
        vocab_size=small.config.vocab_size, d_model=1280, encoder_layers=32, decoder_layers=32,
        encoder_attention_heads=20, decoder_attention_heads=20, encoder_ffn_dim=5120, decoder_ffn_dim=5120,
        num_mel_bins=128, max_source_positions=1500, max_target_positions=448,
        pad_token_id=small.config.pad_token_id, bos_token_id=small.config.bos_token_id,
        eos_token_id=small.config.eos_token_id, decoder_start_token_id=small.config.decoder_start_token_id,
    )  # large-v3's sizes
    torch.manual_seed(0)
    model = WhisperForConditionalGeneration(config).eval()
    model.generation_config = small.generation_config
    model.save_pretrained(folder / "full")
    processor = WhisperProcessor.from_pretrained(tiny)
    processor.feature_extractor.feature_size = processor.feature_extractor.num_mel_bins = 128
    processor.save_pretrained(folder / "full")
    return folder / "full"


def best_rate(run: Callable[[], Any], count: int, repeats: int) -> tuple[float, Any]:
    result, best = None, float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        result = run()
        best = min(best, time.perf_counter() - started)
    return count / best, result


def compare(
    name: str, reward_for: Callable[[int, int, str], Reward], items: list[dict], backend_rate: Callable[[], float], args: argparse.Namespace
) -> dict[str, Any]:
    """One by one (batch shape 1: no padding, the fastest way to score single items) vs together
    (batch shape ``--batch-size``); identity is checked against one by one at the same shape."""
    rates, rows = {}, {}
    baseline = items[: args.baseline_items] if args.baseline_items else items
    ways = (
        ("before", 1, 1, "numpy", baseline), ("one_by_one", 1, 1, "torch", baseline),
        ("together", args.in_flight, args.batch_size, "torch", items),
    )  # fmt: skip
    for label, flight, shape, features, scored_items in ways:
        reward = reward_for(flight, shape, features)
        reward.rows(items[:2])  # loads the model and indexes the references outside the timing
        if flight > 1 and args.decode_processes:  # and starts the decoding processes
            reward.rows(items[: 4 * args.decode_processes])
        rates[label], scored = best_rate(lambda: reward.rows(scored_items), len(scored_items), args.repeats)
        rows[label] = [json.dumps(row) for row in scored]
    same_shape = [json.dumps(row) for row in reward_for(1, args.batch_size, "torch").rows(items[: args.check])]
    refuse_error_rows(name, [json.loads(row) for label in rows for row in rows[label]])
    return {
        "task": name, **rates, "speedup": rates["together"] / rates["one_by_one"],
        "speedup_before": rates["together"] / rates["before"], "identical": same_shape == rows["together"][: args.check],
        "backend": backend_rate(),
    }  # fmt: skip


def refuse_error_rows(name: str, rows: list[dict]) -> None:
    """Rates of rows that failed (a package missing, say) mean nothing: stop with the first error."""
    errors = [row["error"] for row in rows if row["status"] == "error"]
    if errors:
        sys.exit(f"{name}: {len(errors)} error rows, first: {errors[0]}")


def backend_alone(
    make: Callable[[], Any], call: Callable[[Any, list[np.ndarray]], Any], clips: list[Path], args: argparse.Namespace
) -> Callable[[], float]:
    """The backend's own batched throughput: ``clips`` decoded and resampled to its rate beforehand,
    then all of them in one call (the backend cuts them into ``--batch-size`` batches).  The backend
    is built for the measurement and dropped after it, so it holds no device memory meanwhile."""

    @functools.cache  # measured once, for the Reward rows and the `score` rows alike
    def rate() -> float:
        measured = rate_of(make(), call, clips, args.repeats)  # the backend is dropped on return
        release_device_memory()
        return measured

    return rate


def rate_of(backend: Any, call: Callable[[Any, list[np.ndarray]], Any], clips: list[Path], repeats: int) -> float:
    """Clips/s of ``call(backend, clips)``, the clips decoded and resampled to the backend's rate beforehand."""
    from mmverify.core.media import load_audio

    backend.ensure_loaded()  # outside the timing; the checkpoint sets the sample rate
    audio = [load_audio(path, backend.sample_rate)[0] for path in clips]
    call(backend, audio[:1])
    return best_rate(lambda: call(backend, audio), len(audio), repeats)[0]


def release_device_memory() -> None:
    import gc

    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()  # what this process no longer uses goes back to the worker processes


class RowClock:
    """Rows/s of a results file once rows flow: from the first rows written to the last, so that
    the first worker's start-up and model loading fall outside (with several workers, the later
    ones may still be starting then); and in the middle of the run, between the moments a tenth and
    nine tenths of the rows had been written, which leaves out the later workers' start-up and the
    last batches, when fewer workers than started have items left.  A thread notes each change of
    the file's size (a stat every 10 ms, in the measured process with ``--workers 1``) and counts
    the rows the new bytes end."""

    MIDDLE = (0.1, 0.9)

    def __init__(self, path: Path) -> None:
        self.path = path
        self.timeline: list[tuple[float, int]] = []  # (when, rows written by then), at each change
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def __enter__(self) -> "RowClock":
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def _watch(self) -> None:
        size = rows = 0
        while not self._stop.wait(0.01):
            try:
                now_size = self.path.stat().st_size
            except FileNotFoundError:
                continue
            if now_size != size:
                now = time.perf_counter()
                with open(self.path, "rb") as handle:
                    handle.seek(size)
                    rows += handle.read(now_size - size).count(b"\n")
                size = now_size
                self.timeline.append((now, rows))

    @property
    def first_at(self) -> float:
        return self.timeline[0][0] if self.timeline else 0.0

    @property
    def last_at(self) -> float:
        return self.timeline[-1][0] if self.timeline else 0.0

    def rate(self, rows: int) -> float:
        """Rows/s between the first change and the last (NaN when every row came at once)."""
        if not self.timeline:
            return float("nan")
        (began, first_rows), ended = self.timeline[0], self.last_at
        return (rows - first_rows) / (ended - began) if ended > began and rows > first_rows else float("nan")

    def middle_rate(self, rows: int) -> float:
        """Rows/s between the first changes that reached a tenth and nine tenths of ``rows`` (NaN
        when both came in one change, or the last rows came after the last look at the file)."""
        low, high = (next(((at, n) for at, n in self.timeline if n >= share * rows), None) for share in self.MIDDLE)
        if low is None or high is None or high[0] <= low[0]:
            return float("nan")
        return (high[1] - low[1]) / (high[0] - low[0])


def process_cpu() -> dict[int, tuple[int, float]]:
    """This process's descendants, each pid with its parent's pid and the CPU seconds it has spent
    (``/proc/<pid>/stat``: fields 4, 14 and 15), less multiprocessing's resource tracker."""
    tick, table = os.sysconf("SC_CLK_TCK"), {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                if b"resource_tracker" in (entry / "cmdline").read_bytes():
                    continue
            except OSError:  # ended meanwhile
                continue
            table[int(entry.name)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / tick)
    ours, frontier = {}, [os.getpid()]
    while frontier:
        parent = frontier.pop()
        for pid, (ppid, cpu) in table.items():
            if ppid == parent:
                ours[pid] = (ppid, cpu)
                frontier.append(pid)
    return ours


class CpuWatch:
    """The CPU a run's processes spent, as cores busy over its wall time: this process, and each
    process under it (workers, a model process, decoding processes).  A thread reads ``/proc``
    twice a second, so a process that ends with the run counts up to its last reading; one
    saturated core (a process near 1.0) is where an interpreter lock bounds the run."""

    def __init__(self) -> None:
        self.spent: dict[int, float] = {}  # pid -> CPU seconds since the watch began
        self._before: dict[int, tuple[int, float]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self.wall = self.own = 0.0

    def __enter__(self) -> "CpuWatch":
        self._before, self._own, self._began = process_cpu(), sum(os.times()[:2]), time.perf_counter()
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()
        self._read()
        self.wall, self.own = time.perf_counter() - self._began, sum(os.times()[:2]) - self._own

    def _watch(self) -> None:
        while not self._stop.wait(0.5):
            self._read()

    def _read(self) -> None:
        for pid, (_, seconds) in process_cpu().items():
            self.spent[pid] = seconds - self._before.get(pid, (0, 0.0))[1]

    def summary(self) -> str:
        """``this process / the busiest under it / all under it (how many)``, in cores busy."""
        cores = sorted((seconds / self.wall for seconds in self.spent.values()), reverse=True) if self.wall else []
        return f"{self.own / self.wall if self.wall else float('nan'):.2f}/{cores[0] if cores else 0.0:.2f}/{sum(cores):.1f} ({len(cores)})"


def worker_rates(
    name: str, spec_for: Callable[[int], str], items: list[dict], backend_rate: Callable[[], float], args: argparse.Namespace, root: Path,
    env: dict, setting: WorkerSetting,
) -> dict[str, Any]:
    """``mmverify score --workers N`` (with a model process where ``setting`` says so) with
    ``--batch-items 1`` (shape 1) vs ``--batch-items`` set to this script's ``--in-flight`` (shape
    ``--batch-size``); worker start-up and model loading are inside the timing (a fresh pool per
    run), the reference index is built before it."""
    workers, served, per_worker = setting
    from mmverify.pipelines.context import ScoringContext
    from mmverify.pipelines.score import ScoreConfig, run_score

    baseline = items[: args.baseline_items] if args.baseline_items else items
    manifests = {}
    for label, chosen in (("one_by_one", baseline), ("together", items)):
        manifests[label] = root / f"{name.split()[0]}-{label}-{workers}{'m' if served else ''}-d{per_worker}.jsonl"
        manifests[label].write_text("".join(json.dumps(item) + "\n" for item in chosen), encoding="utf-8")
    tag = f"{name.split()[0]}-{workers}{'m' if served else ''}-d{per_worker}"  # each setting's folders apart
    warm = root / f"{tag}-warm.jsonl"
    warm.write_text("".join(json.dumps(item) + "\n" for item in items[:2]), encoding="utf-8")
    rates, rows, flowing, middle, phases = {}, {}, {}, {}, []
    for label, flight, shape in (("one_by_one", 1, 1), ("together", args.in_flight, args.batch_size)):
        context = ScoringContext(models=spec_for(shape), device=args.device, precision=args.precision, env=env, cache_dir=root / "cache")

        def run(source: Path, out: Path) -> Path:
            decoding = (per_worker or (args.decode_processes if workers == 1 else 0)) if flight > 1 else 0
            config = ScoreConfig(
                source, out, workers=workers, in_flight=flight, decode_processes=decoding, timeout=None, context=context,
                model_process=served,
            )  # fmt: skip
            with RowClock(out / "results.jsonl") as clock, CpuWatch() as cpu:
                began = time.perf_counter()
                path = run_score(config).results_path
                ended = time.perf_counter()
            written = len(path.read_text().splitlines())
            flowing.setdefault(label, []).append(clock.rate(written))
            middle.setdefault(label, []).append(clock.middle_rate(written))
            if label == "together" and clock.first_at:
                phases.append((clock.first_at - began, ended - clock.last_at, cpu.summary()))
            return path

        run(warm, root / f"warm-{label}-{tag}")
        flowing[label], middle[label] = [], []  # the warm-up run's rates are not measured ones
        phases.clear()
        outs = iter(root / f"{label}-{tag}-{i}" for i in range(args.repeats))
        rates[label], path = best_rate(lambda: run(manifests[label], next(outs)), len(baseline if label == "one_by_one" else items), args.repeats)
        rows[label] = [json.loads(line) for line in path.read_text().splitlines()]
    refuse_error_rows(name, [row for label in rows for row in rows[label]])
    scored = all(r["status"] == "scored" for label in rows for r in rows[label]) and len(rows["together"]) == len(items)
    pairs = zip(rows["one_by_one"], rows["together"])
    return {
        "task": name, "setting": setting_name(setting), **rates, "speedup": rates["together"] / rates["one_by_one"], "all_scored": scored,
        "max_delta": max(abs(a["score"] - b["score"]) for a, b in pairs) if scored else float("nan"), "backend": backend_rate(),
        "flowing": max((rate for rate in flowing["together"] if rate == rate), default=float("nan")),  # NaN: none measurable
        "middle": max((rate for rate in middle["together"] if rate == rate), default=float("nan")),
        # the quickest start (to the first rows) and end (after the last) of the runs together, and the last one's CPU
        "start_s": min((start for start, _, _ in phases), default=float("nan")), "end_s": min((end for _, end, _ in phases), default=float("nan")),
        "cores": phases[-1][2] if phases else "-",
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=64)
    parser.add_argument("--in-flight", type=int, default=32, help="items scored together")
    parser.add_argument("--batch-size", type=int, default=32, help="each backend's fixed batch shape")
    parser.add_argument("--clip-seconds", type=float, default=5.0)
    parser.add_argument("--clips", type=int, default=0, help="clip files written, used in turn by the items (0: one per item)")
    parser.add_argument("--max-new-tokens", type=int, default=16, help="fixed Whisper decode length")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--precision", default="fp32", choices=("fp32", "bf16", "fp16"))
    parser.add_argument("--rows", default="auto", choices=("auto", "content", "packed"), help="where inputs sit in a batch (auto: by content on a CPU, packed on a GPU)")
    parser.add_argument("--full", action="store_true", help="full-size CLAP and large-v3-sized Whisper")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--check", type=int, default=16, help="items scored one by one at the batch shape, for the identity check")
    parser.add_argument("--whisper-items", type=int, default=0, help="score the Whisper task on the first N items only (0: all)")
    parser.add_argument("--baseline-items", type=int, default=0, help="time before and one by one on the first N items only (0: all)")
    parser.add_argument(
        "--workers", type=worker_settings, default=[], help="also score with `mmverify score --workers N` for each comma-separated "
        "setting: N, or Nm for N worker processes (N > 1) with a model process computing every worker's batches, each "
        "optionally with :K decoding processes per worker (4,4m,8m,4m:2)",
    )  # fmt: skip
    parser.add_argument("--workers-only", action="store_true", help="with --workers: only the `mmverify score` rows")
    parser.add_argument("--tasks", default="clap,whisper", help="which tasks to score: clap, whisper or both (comma-separated)")
    parser.add_argument("--decode-processes", type=int, default=0, help="processes decoding the media of items scored together (the Reward rows and --workers 1; N:K for more workers)")
    args = parser.parse_args()
    tasks = set(args.tasks.split(","))
    if not tasks or not tasks <= {"clap", "whisper"}:
        parser.error(f"--tasks takes clap, whisper or both, not {args.tasks!r}")
    from mmverify.envfix import install_torchvision_op_stubs

    install_torchvision_op_stubs()  # lets transformers import where torchvision's compiled ops cannot load
    from transformers.utils import logging as transformers_logging

    transformers_logging.set_verbosity_error()  # a fixed decode length warns on every generate call

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        # only the checkpoints scored are built: a large-v3-sized Whisper takes a while to write
        if args.full:
            clap = full_size_clap(root / "clap") if "clap" in tasks else None
            whisper = full_size_whisper(root / "whisper") if "whisper" in tasks else None
        else:
            clap = build_tiny_clap(root / "clap") if "clap" in tasks else None
            whisper = build_tiny_hf_whisper(root / "whisper", max_length=64) if "whisper" in tasks else None
        clips = write_clips(root / "clips", min(args.items, args.clips or args.items), args.clip_seconds, seed=7)
        env = {"MMVERIFY_NO_OUTPUT_CACHE": "1"}
        if clap:  # only the CLAP task compares with a reference set
            env["MMVERIFY_REFERENCES"] = f"esc50={esc50_references(root / 'ESC-50', per_class=12)}"

        def reward_for(spec: str) -> Callable[[int, int, str], Reward]:
            def build(flight: int, shape: int, features: str) -> Reward:
                models = spec.format(options=f"batch_size={shape}&features={features}&rows={args.rows}")
                return Reward(
                    models=models, device=args.device, precision=args.precision, env=env, in_flight=flight, cache_dir=root / "cache",
                    decode_processes=args.decode_processes if flight > 1 else 0,
                )

            return build

        sound = [
            {"task": "a_sound_cot", "instance": {"target": CLASSES[i % len(CLASSES)]}, "parts": [{"type": "audio", "path": str(p)}]}
            for i, p in enumerate(cycled(clips, args.items))
        ]
        speech = [
            {"task": "a_speech_translate", "instance": {"text": SENTENCE}, "parts": [{"type": "audio", "path": str(p)}]}
            for p in cycled(clips, args.items)
        ]
        whisper_spec = f"transcriber=whisper-hf@{whisper}?{{options}}&max_new_tokens={args.max_new_tokens}"
        from mmverify.models.clap_hf import HFClap
        from mmverify.models.whisper import HFWhisper

        options = {"device": args.device, "batch_size": args.batch_size, "precision": args.precision, "rows": args.rows}
        speech_clips = clips[: args.whisper_items] if args.whisper_items else clips
        speech = speech[: args.whisper_items or len(speech)]
        clap_alone = backend_alone(lambda: HFClap(source=str(clap), **options), lambda m, audio: m.embed_audio(audio), clips, args)
        whisper_alone = backend_alone(
            lambda: HFWhisper(source=str(whisper), max_new_tokens=args.max_new_tokens, **options),
            lambda m, audio: m.transcribe(audio, language="en"), speech_clips, args,
        )  # fmt: skip
        print_setting(args, len(sound) if clap else 0, len(speech) if whisper else 0)
        if not args.workers_only:  # each row as soon as it is measured: a run cut short keeps the rows before
            print_reward_header()
            if clap:
                print_reward_row(compare("a_sound_cot (CLAP)", reward_for(f"audio_text=clap-hf@{clap}?{{options}}"), sound, clap_alone, args))
            if whisper:
                print_reward_row(compare("a_speech_translate (Whisper)", reward_for(whisper_spec), speech, whisper_alone, args))
        if args.workers:
            clap_spec = lambda shape: f"audio_text=clap-hf@{clap}?batch_size={shape}&rows={args.rows}"  # noqa: E731
            whisper_spec_for = lambda shape: whisper_spec.format(options=f"batch_size={shape}&rows={args.rows}")  # noqa: E731
            print_score_header(args)
            for setting in args.workers:  # each row as soon as it is measured
                if clap:
                    print_score_row(worker_rates("a_sound_cot (CLAP)", clap_spec, sound, clap_alone, args, root, env, setting))
                if whisper:
                    print_score_row(worker_rates("a_speech_translate (Whisper)", whisper_spec_for, speech, whisper_alone, args, root, env, setting))


def print_setting(args: argparse.Namespace, sound_items: int, speech_items: int) -> None:
    size = "full-size" if args.full else "tiny"
    print(f"{sound_items} CLAP and {speech_items} Whisper items of {args.clip_seconds:g} s, {size} random-init models on "
          f"{args.device}, {args.precision}, batch shape {args.batch_size}, rows {args.rows}, {args.in_flight} items in flight, "
          f"best of {args.repeats}", flush=True)  # fmt: skip
    if args.decode_processes:
        print(f"together: media decoded by {args.decode_processes} decoding process(es)", flush=True)
    if args.baseline_items:
        print(f"before and one by one timed on the first {args.baseline_items} items", flush=True)


def print_reward_header() -> None:
    print(
        f"{'task':30} {'before':>12} {'one by one':>12} {'together':>12}  {'vs one by one':>13}  {'vs before':>9}  "
        f"identical rows  {'backend alone':>13}  together/backend", flush=True,
    )  # fmt: skip


def print_reward_row(r: dict[str, Any]) -> None:
    print(
        f"{r['task']:30} {r['before']:7.1f} it/s {r['one_by_one']:7.1f} it/s {r['together']:7.1f} it/s  "
        f"{r['speedup']:12.2f}x  {r['speedup_before']:8.2f}x  {'yes' if r['identical'] else 'NO':>14}  "
        f"{r['backend']:8.1f} it/s  {r['together'] / r['backend']:15.2f}", flush=True,
    )  # fmt: skip


def print_score_header(args: argparse.Namespace) -> None:
    print("mmverify score, worker start-up and model loading included "
          "(once rows flow: from the first rows written to the last; middle: from a tenth of the rows written to nine tenths; "
          "to first rows: from the call to them; "
          "after last: from the last rows to the run's end, its processes stopped; "
          "CPU cores: busy over the run in this process / the busiest process under it / all under it (how many))", flush=True)  # fmt: skip
    print(
        f"{'task':32} {'setting':>30} {'one by one':>14} {'together':>14} {'speed-up':>9}  together/backend  "
        f"{'once rows flow':>14}  flowing/backend  {'middle':>12}  middle/backend  {'to first rows':>13}  {'after last':>10}  "
        f"{'CPU cores':>18}  max |score difference| (batch shapes 1 and {args.batch_size})", flush=True,
    )  # fmt: skip


def print_score_row(r: dict[str, Any]) -> None:
    print(
        f"{r['task']:32} {r['setting']:>30} {r['one_by_one']:10.1f} it/s {r['together']:10.1f} it/s {r['speedup']:8.2f}x  "
        f"{r['together'] / r['backend']:16.2f}  {r['flowing']:9.1f} it/s  {r['flowing'] / r['backend']:15.2f}  "
        f"{r['middle']:7.1f} it/s  {r['middle'] / r['backend']:14.2f}  "
        f"{r['start_s']:11.2f} s  {r['end_s']:8.2f} s  {r['cores']:>18}  {r['max_delta']:.2g}", flush=True,
    )  # fmt: skip


if __name__ == "__main__":
    main()
