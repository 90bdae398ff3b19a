"""benchmarks/gpu_run.sh, run the way a GPU machine runs it but on tiny workloads on this CPU.

A machine with a GPU is lent to few sessions, for minutes: the script that measures there must
not be found broken then.  Its ``QUICK=1`` mode runs every benchmark of a part on tiny inputs; the
assertions are about what it runs and reports, never about speed.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import running_in_ci

REPO = Path(__file__).resolve().parents[1]


def needs_the_models_extra() -> None:
    """The script checks for every package its benchmarks import before it runs any."""
    missing = [name for name in ("dreamsim", "open_clip", "transformers") if importlib.util.find_spec(name) is None]
    if missing:
        pytest.skip(f"without the [models] extra ({', '.join(missing)})")


def gpu_run(part: str, out: Path, **env: str) -> subprocess.CompletedProcess:
    no_wheels = out / "no-wheels"  # this Python has every package: nothing to install
    no_wheels.mkdir(parents=True, exist_ok=True)
    variables = {
        **os.environ, "PYTHON": sys.executable, "DEVICE": "cpu", "QUICK": "1", "OUT": str(out), "WHEELS": str(no_wheels),
        "DEVICE_TESTS_CAP": "900",  # the CUDA-only tests' cap guards a device call; here, on a busy CPU, only hangs
        **env,
    }  # fmt: skip
    return subprocess.run(
        ["bash", str(REPO / "benchmarks" / "gpu_run.sh"), part], cwd=REPO, env=variables, capture_output=True, text=True
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    "part, rows",
    [
        ("clap", {
            "device_tests": ["passed", "skipped"],  # the CUDA-only tests skip here
            "clap_frontend": ["torch front end (cpu, float64)", "embed_audio, torch, fp32, earlier copies", "embed_audio staged = earlier copies (fp32)", "same bytes"],
            "score_decoding": ["mmverify score", "--workers 1", "media decoded by 2 decoding process(es)", "identical rows"],
            "host_ceiling": ["launch 0 ms, device 1 ms a batch: backend alone", "decoding in item threads", "2 decoding processes"],
            "device_contention": ["backend alone", "2 decoding processes", "CUDA graph: needs a CUDA device"],
        }),
        ("models", {
            "clap_frontend": ["numpy ClapFeatureExtractor", "torch front end (cpu, float64)"],
            "whisper_frontend": ["WhisperFeatureExtractor", "torch front end (cpu)"],
            "clip_models": ["speaker (WavLM x-vector)", "gender (wav2vec2)"],
            "dreamsim_batching": ["alone = in batch"],
        }),
        ("scoring", {"batched_scoring": ["identical rows", "a_sound_cot (CLAP)", "a_speech_translate (Whisper)", "8 CLAP and 4 Whisper items"]}),
        ("score", {
            "score_decoding": ["mmverify score", "--workers 1", "media decoded by 2 decoding process(es)", "a_sound_cot (CLAP)", "identical rows"],
            "score_workers": ["mmverify score", "--workers 2", "a_sound_cot (CLAP)", "8 CLAP and 0 Whisper items"],
        }),
        ("embed", {"clap_frontend": ["embed_audio, torch front end, fp32", "embed_audio staged = earlier copies (bf16)", "same bytes"]}),
        ("workers", {
            "score_workers": ["--workers 2 --model-process", "once rows flow", "middle/backend", "CPU cores", "(3)", "a_sound_cot (CLAP)"],
        }),
        ("ceiling", {
            "host_ceiling": ["launch 0 ms, device 1 ms a batch: backend alone", "decoding in item threads", "2 workers, model process", "CPU ms an item: this process"],
        }),
    ],
)  # fmt: skip
def test_each_part_runs_every_benchmark_and_each_prints_its_rows(tmp_path: Path, part: str, rows: dict[str, list[str]]):
    needs_the_models_extra()
    result = gpu_run(part, tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    exits = [line for line in result.stdout.splitlines() if line.startswith("=== ") and " exit " in line]
    assert len(exits) == len(rows) and all(line.endswith(" exit 0") for line in exits), exits
    for name, lines in rows.items():  # by log: a benchmark run twice keeps one log per run
        log = (tmp_path / f"{name}.log").read_text()
        for line in lines:
            assert line in log, f"{name}: {line!r} missing from its log"
        assert "NOT the same" not in log
    if part == "workers":  # one row per setting: with a model process, then without
        log = (tmp_path / "score_workers.log").read_text()
        assert [line.split("(CLAP)")[1].strip().split("  ")[0] for line in log.splitlines() if line.startswith("a_sound_cot")] == [
            "--workers 2 --model-process", "--workers 2",
        ]
    assert (tmp_path / "machine.txt").read_text().strip()


@pytest.mark.slow
def test_the_workers_part_scores_the_settings_it_is_given(tmp_path: Path):
    needs_the_models_extra()
    result = gpu_run("workers", tmp_path, SETTINGS="2m:1")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    log = (tmp_path / "score_workers.log").read_text()
    rows = [line for line in log.splitlines() if line.startswith("a_sound_cot")]
    assert len(rows) == 1 and "--workers 2 --model-process --decode-processes 1" in rows[0] and "NOT the same" not in log


@pytest.mark.slow
def test_the_one_call_part_runs_each_benchmark_once_and_keeps_both_scoring_logs(tmp_path: Path):
    needs_the_models_extra()
    result = gpu_run("all", tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    names = ("clap_frontend", "batched_scoring", "batched_scoring", "dreamsim_batching", "clip_models", "whisper_frontend", "device_contention")
    assert [line.split()[1] for line in result.stdout.splitlines() if line.endswith(" exit 0")] == list(names)  # in this order
    clap, whisper = (tmp_path / "scoring_clap.log").read_text(), (tmp_path / "scoring_whisper.log").read_text()
    assert "mmverify score" in clap and "--workers 1" in clap and "a_sound_cot (CLAP)" in clap and "a_speech_translate" not in clap
    assert "8 CLAP and 0 Whisper items" in clap
    assert "identical rows" in whisper and "a_speech_translate (Whisper)" in whisper and "a_sound_cot" not in whisper
    assert "speaker (WavLM x-vector)" in (tmp_path / "clip_models.log").read_text()
    assert "alone = in batch" in (tmp_path / "dreamsim_batching.log").read_text()
    contention = (tmp_path / "device_contention.log").read_text()
    assert "backend alone" in contention and "2 preparing at once" in contention and "2 decoding processes" in contention
    assert "8 in flight" in contention  # the last row
    assert len(list(tmp_path.glob("*.log"))) + 1 <= 8  # with machine.txt: what one device call brings back


def path_with_a_working_py_spy(tmp_path: Path) -> str:
    """PATH with this Python's folder first, where py-spy is installed and can sample; else the test skips."""
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    spy = shutil.which("py-spy", path=path)
    if spy is None:
        if running_in_ci():
            pytest.fail("py-spy is not installed, and CI=true: the [dev] extra has it", pytrace=False)
        pytest.skip("py-spy is not installed (the [dev] extra has it)")
    trial = subprocess.run([spy, "record", "--format", "raw", "-o", str(tmp_path / "trial.raw"), "--", sys.executable, "-c", "import time; time.sleep(1)"],
                           capture_output=True, text=True)  # fmt: skip
    if trial.returncode != 0:  # sampling another process needs ptrace rights that some containers withhold
        pytest.skip(f"py-spy cannot sample here: {trial.stderr.strip()[-300:]}")
    return path


def profiled_part_log(part: str, name: str, tmp_path: Path) -> str:
    """The log of a part that runs a benchmark under py-spy, which must have ended well."""
    needs_the_models_extra()
    result = gpu_run(part, tmp_path, PATH=path_with_a_working_py_spy(tmp_path))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert f"=== {name} exit 0" in result.stdout
    return (tmp_path / f"{name}.log").read_text()


@pytest.mark.slow
def test_the_profile_part_summarises_who_held_the_lock_while_items_were_scored(tmp_path: Path):
    log = profiled_part_log("profile", "gil_profile", tmp_path)
    assert "16 in flight" not in log and "8 in flight" in log  # the first setting alone
    # the summary of the raw stacks beside it (a short run may catch no scoring thread holding the
    # lock: either summary is the summariser's, tests/test_gil_summary.py)
    summary = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "gil_summary.py"), str(tmp_path / "gil.raw")], capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert ("samples holding the interpreter lock" in summary or "no samples of the scoring threads" in summary) and summary in log
    assert "): MainThread;" in (tmp_path / "gil.raw").read_text()  # the raw stacks stay beside it, by thread (start-up holds the lock)


@pytest.mark.slow
def test_the_model_profile_part_says_where_the_model_process_threads_spent_their_time(tmp_path: Path):
    log = profiled_part_log("model-profile", "model_profile", tmp_path)
    assert "--workers 2 --model-process" in log and "once rows flow" in log  # the benchmark's own rows
    for role in ("mmverify-model-reader", "mmverify-model-answer", "mmverify-model-batches"):  # every process sampled
        assert f"{role}: " in log, role
    assert "samples\n" in log and "holding the interpreter lock" not in log  # every sample, not the lock's
    raw = (tmp_path / "model.raw").read_text()
    assert raw.count("mmverify-model-reader") and "process " in raw  # the raw stacks stay beside it, by process


@pytest.mark.slow
def test_a_failing_benchmark_fails_the_part_and_a_missing_package_stops_it_first(tmp_path: Path):
    needs_the_models_extra()
    broken = gpu_run("scoring", tmp_path / "broken", DEVICE="cuda:99")  # no such device: every row an error
    assert broken.returncode == 1 and "=== batched_scoring exit 1" in broken.stdout
    assert "error rows" in (tmp_path / "broken" / "batched_scoring.log").read_text()  # not rates of failed rows

    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "dreamsim.py").write_text("raise ImportError('not here')\n")  # as on a machine without it
    missing = gpu_run("models", tmp_path / "missing", PYTHONPATH=str(shadow))
    assert missing.returncode == 1 and "a package the benchmarks need is missing" in missing.stderr
    assert "not here" in missing.stderr  # the shadowed package is what stopped it
    assert "===" not in missing.stdout  # nothing ran

    unknown = gpu_run("everything", tmp_path / "unknown")
    assert unknown.returncode == 2 and "unknown part" in unknown.stderr
