"""Who held the interpreter lock: a summary of a ``py-spy record --gil --threads --format raw`` profile.

py-spy's ``--gil`` mode samples only the thread that holds the lock, so each thread role's share of
the samples is its share of the lock.  Roles are the thread names mmverify gives (``mmverify-item``,
``mmverify-device``; a worker's ``mmverify-model-batches`` and ``mmverify-model-replies``; a model
process's ``mmverify-model-reader`` and ``mmverify-model-answer``; anything else is ``other``),
summed over processes for a profile taken with ``--subprocesses``; the main thread counts only
while it is inside ``--main-within`` (default: the timed trials of ``device_contention.py``, not
start-up; empty: never).  For each role the summary prints the functions that held the lock themselves most
often (self) and the functions under which it was held most often (inclusive).

With ``--every-sample`` the profile is one taken with ``--idle`` instead of ``--gil``: every thread
is sampled, waiting or not, and each role's lines say where its threads spent their time (a model
process's reader waiting for the next batch, for a free slot, or launching one).

    py-spy record --gil --threads --format raw -o gil.raw -- python3 benchmarks/device_contention.py --first-only
    python3 benchmarks/gil_summary.py gil.raw
"""

from __future__ import annotations

import argparse
import re
from collections import Counter, defaultdict
from pathlib import Path

THREAD = re.compile(r"^thread \(\d+\)(?::\s*(?P<name>.*))?$")
ROLES = (
    "mmverify-device", "mmverify-item", "mmverify-model-batches", "mmverify-model-replies", "mmverify-model-reader",
    "mmverify-model-answer",
)


def role_of(thread_frame: str) -> str:
    match = THREAD.match(thread_frame.strip())
    name = (match.group("name") or "").strip() if match else ""
    return name if name in ROLES or name == "MainThread" else "other"


def function_of(frame: str) -> str:
    """``name (file.py:line)`` without the line: one entry per function."""
    return re.sub(r":\d+\)$", ")", frame.strip())


def summarize(lines: list[str], main_within: str, top: int, every_sample: bool = False) -> str:
    shares: Counter[str] = Counter()
    own: dict[str, Counter[str]] = defaultdict(Counter)
    under: dict[str, Counter[str]] = defaultdict(Counter)
    for line in lines:
        stack, _, count = line.rstrip("\n").rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = [frame for frame in stack.split(";") if frame]
        first = next((i for i, frame in enumerate(frames) if THREAD.match(frame.strip())), None)
        if first is None:  # not a thread's stack (a process's command line cut by a line break)
            continue
        role = role_of(frames[first])  # the frames before it name the processes (--subprocesses)
        calls = frames[first + 1 :]
        if role == "MainThread" and not (main_within and any(main_within in frame for frame in calls)):
            continue
        samples = int(count)
        if not samples:
            continue
        shares[role] += samples
        if calls:
            own[role][function_of(calls[-1])] += samples
            for function in dict.fromkeys(function_of(frame) for frame in calls if "(threading.py" not in frame):
                under[role][function] += samples  # threading's own frames sit under every thread
    total = sum(shares.values())
    if not total:
        return "no samples of the scoring threads"
    out = [f"{total} samples" + ("" if every_sample else " holding the interpreter lock")]
    for role, samples in shares.most_common():
        out.append(f"\n{role}: {samples / total:6.1%} of the " + ("samples" if every_sample else "lock"))
        out.append("  self:")
        out.extend(f"    {n / samples:6.1%}  {name}" for name, n in own[role].most_common(top))
        out.append("  inclusive:")
        out.extend(f"    {n / samples:6.1%}  {name}" for name, n in under[role].most_common(top))
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("profile", type=Path, help="py-spy's raw (collapsed stacks) output")
    parser.add_argument(
        "--main-within", default="trial (", help="count the main thread only inside frames containing this (empty: never)"
    )
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--every-sample", action="store_true", help="a profile taken with --idle: every thread, waiting or not")
    args = parser.parse_args()
    lines = args.profile.read_text(encoding="utf-8", errors="replace").splitlines()
    print(summarize(lines, args.main_within, args.top, args.every_sample))


if __name__ == "__main__":
    main()
