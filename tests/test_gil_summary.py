"""benchmarks/gil_summary.py on collapsed stacks whose shares are known by construction."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from gil_summary import summarize  # noqa: E402

LINES = [
    "thread (11): mmverify-item;Thread.run (threading.py:982);score_item (mmverify/pipelines/execute.py:126);resample (mmverify/core/media.py:160) 30",
    "thread (12): mmverify-item;Thread.run (threading.py:982);score_item (mmverify/pipelines/execute.py:130);make_row (mmverify/pipelines/results.py:58) 10",
    "thread (13): mmverify-device;Thread.run (threading.py:982);_run (mmverify/models/batching.py:330) 60",
    "thread (1): MainThread;<module> (x.py:1);import_stuff (x.py:5) 500",  # start-up: not counted
    "thread (1): MainThread;<module> (x.py:1);trial (device_contention.py:90);rows (reward.py:10) 0",
    "",
    "garbage without a count",
]


def test_shares_count_each_role_and_leave_out_the_main_thread_outside_the_trials():
    text = summarize(LINES, "trial (", top=5)
    assert text.startswith("100 samples holding the interpreter lock")
    assert "mmverify-device:  60.0% of the lock" in text and "mmverify-item:  40.0% of the lock" in text
    assert "MainThread" not in text  # its only counted line had no samples


def test_self_and_inclusive_lines_name_functions_without_line_numbers():
    item = summarize(LINES, "trial (", top=5).split("mmverify-item:")[1]
    self_part, inclusive = item.split("inclusive:")
    assert "75.0%  resample (mmverify/core/media.py)" in self_part and "25.0%  make_row (mmverify/pipelines/results.py)" in self_part
    assert "100.0%  score_item (mmverify/pipelines/execute.py)" in inclusive  # two lines, one function
    assert "threading.py" not in inclusive


def test_nothing_sampled_says_so():
    assert summarize(LINES[3:4], "trial (", top=5) == "no samples of the scoring threads"


SUBPROCESS_LINES = [  # py-spy --subprocesses --idle: each stack starts with the processes it is in
    'process 100:"python -m mmverify score";process 200:"python -c from multiprocessing.spawn import spawn_main";'
    "thread (5): mmverify-model-reader;Thread.run (threading.py:982);serve_connection (mmverify/pipelines/model_process.py:150);"
    "read_message (mmverify/core/decode_worker.py:123);readinto (mmverify/core/decode_worker.py:75) 30",
    'process 100:"python -m mmverify score";process 200:"python -c from multiprocessing.spawn import spawn_main";'
    "thread (5): mmverify-model-reader;Thread.run (threading.py:982);serve_connection (mmverify/pipelines/model_process.py:150);"
    "_launch (mmverify/pipelines/model_process.py:101) 10",
    'process 100:"python -m mmverify score";process 300:"python -c from multiprocessing.spawn import spawn_main";'
    "thread (7): mmverify-model-batches;Thread.run (threading.py:982);_send_batches (mmverify/models/served.py:200) 20",
    'process 100:"python -c ',  # a command line broken over lines: its pieces are no stacks
    '    import sys',
    'print(1)";thread (1): MainThread;<module> (<string>:3) 40',
]


def test_a_profile_of_several_processes_sums_each_role_over_them():
    text = summarize(SUBPROCESS_LINES, "", top=5, every_sample=True)
    assert text.startswith("60 samples\n")  # every sample, not the lock's; no main thread
    assert "mmverify-model-reader:  66.7% of the samples" in text and "mmverify-model-batches:  33.3% of the samples" in text
    reader = text.split("mmverify-model-reader:")[1].split("mmverify-model-batches:")[0]
    assert "75.0%  readinto (mmverify/core/decode_worker.py)" in reader and "25.0%  _launch (mmverify/pipelines/model_process.py)" in reader
    assert "process 100" not in text and "MainThread" not in text
