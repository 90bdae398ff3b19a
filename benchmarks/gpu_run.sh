#!/usr/bin/env bash
# The GPU figures of batch-first scoring, one part per device call (each fits a 10-minute call):
#
#   bash benchmarks/gpu_run.sh clap      # the two CLAP goals in one call: the CUDA-only tests, embed_audio (staged vs
#                                        # the earlier copies), end-to-end items with 8 decoding processes, the host around a
#                                        # simulated device, the device thread
#   bash benchmarks/gpu_run.sh models    # CLAP and Whisper front ends; speaker, gender and DreamSim models
#   bash benchmarks/gpu_run.sh scoring   # end-to-end items/s of a CLAP and a Whisper task (Reward API);
#                                        # Whisper on 512 of the 2,048 items: a large-v3 encoder costs ~2 TFLOP a clip
#   bash benchmarks/gpu_run.sh score     # CLAP with media decoded in 8 processes (Reward, `score --workers 1`),
#                                        # then through `mmverify score --workers 2` and `--workers 4`
#   bash benchmarks/gpu_run.sh embed     # CLAP embed_audio alone over 2,048 clips, with its diagnostics (~190 s on an H100)
#   bash benchmarks/gpu_run.sh workers   # CLAP at scale, one run of the benchmark: `mmverify score --workers 8 --model-process`,
#                                        # then `--workers 12 --model-process`, over 16,384 items (ITEMS=N), with their rates
#                                        # once rows flow and in the middle of the run (worker start-up left out), and
#                                        # the cores each kind of process kept busy (the parent, the busiest child, all);
#                                        # SETTINGS=4m,4,8m:1 scores other settings (batched_scoring.py --workers: N, Nm with
#                                        # a model process, :K decoding processes each)
#   bash benchmarks/gpu_run.sh all       # one call of under 10 minutes (a 15-minute device lease): the CLAP
#                                        # figures first, then Whisper, DreamSim, speaker/gender, on smaller
#                                        # workloads, and last where items scored together lose time
#   bash benchmarks/gpu_run.sh profile   # who holds the interpreter lock while they do (py-spy --gil, summarised)
#   bash benchmarks/gpu_run.sh model-profile  # where each thread of `score --workers 12 --model-process` spends its time,
#                                        # the model process's reader and answer threads apart (py-spy --idle, summarised)
#   bash benchmarks/gpu_run.sh ceiling   # the host alone around a simulated device (no GPU used: any 16-CPU machine):
#                                        # one process, then 4 and 8 workers around a model process, with the CPU each
#                                        # kind of process spends an item (PER_WORKER=K: K decoding processes in each worker)
#
# Wheels carried in .whl/ (fetched here by benchmarks/gpu_wheels.sh; WHEELS names another folder)
# are installed to /tmp/site first.  Every benchmark runs under its own time cap and writes its log to $OUT (default
# /tmp/gpu-out), so one that runs out of time still leaves the others' figures.  PYTHON (python3),
# DEVICE (cuda) and QUICK=1 (tiny workloads: a check of this script on any machine) can be set.
set -u
cd "$(dirname "$0")/.."
part=${1:?"which part: clap, models, scoring, score, embed, workers, all, profile, model-profile or ceiling"}
case $part in clap | models | scoring | score | embed | workers | all | profile | model-profile | ceiling) ;;
  *) echo "unknown part: $part (clap, models, scoring, score, embed, workers, all, profile, model-profile or ceiling)" >&2; exit 2 ;;
esac
out=${OUT:-/tmp/gpu-out}
python=${PYTHON:-python3}
device=${DEVICE:-cuda}
quick=${QUICK:-0}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
wheels=${WHEELS:-.whl}
if ls "$wheels"/*.whl >/dev/null 2>&1; then
  "$python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$wheels"/*.whl || exit
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
# every package the benchmarks import, up front: a missing one would otherwise turn rows into errors
"$python" -c "import sys; sys.path.insert(0, 'src'); from mmverify.envfix import install_torchvision_op_stubs as repair
repair()  # as the benchmarks do: a torchvision whose compiled ops cannot load here still imports
import numpy, scipy, torch, torchvision, transformers, soundfile, soxr, jiwer, sacrebleu, peft, open_clip, dreamsim" \
  || { echo "a package the benchmarks need is missing (see benchmarks/gpu_wheels.sh)" >&2; exit 1; }
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>/dev/null || echo "no nvidia-smi"
  "$python" -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"
  nproc; } > "$out/machine.txt" 2>&1
cat "$out/machine.txt"

# run NAME CAP_S ARGS...: one benchmark under a time cap, its output to $out/NAME.log and here
status=0
run() {
  local name=$1 cap=$2
  shift 2
  echo "=== $name $*"
  timeout "$cap" "$python" "benchmarks/$name.py" "$@" > "$out/$name.log" 2>&1
  local code=$?
  grep -v -e "Loading weights" -e "Writing model shards" "$out/$name.log" | tail -n 12
  echo "=== $name exit $code"
  [ "$code" = 0 ] || status=1
}

# device_tests: the tests that only run on CUDA (copies that do not wait, the front end on the device)
# and the device thread's launched batches, into $out/device_tests.log
device_tests() {
  local code
  echo "=== device_tests"
  PYTHONPATH="src:.${PYTHONPATH:+:$PYTHONPATH}" timeout "${DEVICE_TESTS_CAP:-120}" "$python" -m pytest -q -p no:cacheprovider -m "slow or not slow" -o addopts="" \
    tests/models/test_transfer.py tests/models/test_clap_features.py tests/models/test_round_launches.py -k "not librosa" \
    > "$out/device_tests.log" 2>&1  # librosa is not on the GPU machine
  code=$?
  tail -n 8 "$out/device_tests.log"
  echo "=== device_tests exit $code"
  [ "$code" = 0 ] || status=1
}

# spy: the path of py-spy (installed here, or from the carried wheels), or a complaint and status 1
spy() {
  command -v py-spy || { [ -x /tmp/site/bin/py-spy ] && echo /tmp/site/bin/py-spy; } \
    || { echo "py-spy is missing (benchmarks/gpu_wheels.sh fetches it)" >&2; status=1; return 1; }
}

# profile ARGS...: device_contention.py's first setting under py-spy's --gil sampling (the thread
# holding the lock), summarised by gil_summary.py into $out/gil_profile.log; the raw stacks stay beside it
profile() {
  local sampler code
  sampler=$(spy) || return
  echo "=== gil_profile $*"
  timeout 300 "$sampler" record --gil --threads --nonblocking --rate 250 --format raw -o "$out/gil.raw" -- \
    "$python" benchmarks/device_contention.py --first-only --prep-limits "" "$@" > "$out/gil_profile.log" 2>&1
  code=$?
  [ "$code" = 0 ] && { "$python" benchmarks/gil_summary.py "$out/gil.raw" >> "$out/gil_profile.log" 2>&1 || code=1; }
  grep -v -e "Loading weights" -e "Writing model shards" -e "^py-spy>" "$out/gil_profile.log" | head -n 60
  echo "=== gil_profile exit $code"
  [ "$code" = 0 ] || status=1
}

# model_profile CAP ARGS...: batched_scoring.py (its `mmverify score` settings) under py-spy's --idle
# sampling of every process and thread, summarised by role (the model process's reader waiting for
# a batch, for a slot or launching; its answer thread; the workers' item and sender threads) into
# $out/model_profile.log; the raw stacks stay beside it
model_profile() {
  local sampler code cap=$1
  shift
  sampler=$(spy) || return
  echo "=== model_profile $*"
  timeout "$cap" "$sampler" record --idle --threads --subprocesses --nonblocking --rate 50 --format raw -o "$out/model.raw" -- \
    "$python" benchmarks/batched_scoring.py "$@" > "$out/model_profile.log" 2>&1
  code=$?
  [ "$code" = 0 ] && { "$python" benchmarks/gil_summary.py --every-sample --main-within "" --top 8 "$out/model.raw" \
    >> "$out/model_profile.log" 2>&1 || code=1; }
  grep -v -e "Loading weights" -e "Writing model shards" -e "^py-spy>" "$out/model_profile.log" | head -n 90
  echo "=== model_profile exit $code"
  [ "$code" = 0 ] || status=1
}

# CLAP items with media decoded in 8 processes, Reward and `score --workers 1` (`all` measures both
# without them), into $out/score_decoding.log
clap_decoding() {
  run batched_scoring 150 --full --device "$device" --items 2048 --in-flight 256 --batch-size 128 \
    --baseline-items 128 --repeats 1 --check 8 --tasks clap --workers 1 --decode-processes 8
  mv "$out/batched_scoring.log" "$out/score_decoding.log"
}

if [ "$quick" = 1 ]; then
  size=(--repeats 1)
  case $part in
    clap)
      device_tests
      run clap_frontend 300 --device "$device" --clips 4 --batch-sizes 2 --numpy-clips 2 --model "${size[@]}"
      run batched_scoring 600 --device "$device" --items 8 --in-flight 4 --batch-size 4 --baseline-items 4 --check 2 \
        --tasks clap --workers 1 --decode-processes 2 "${size[@]}"
      mv "$out/batched_scoring.log" "$out/score_decoding.log"
      run host_ceiling 300 --items 8 --in-flight 4 --batch-size 4 --launch-ms 0 --device-ms 1 --decode-processes 2
      run device_contention 300 --device "$device" --items 8 --in-flight 4 --batch-size 4 --prep-limits "" --decode-processes 2 \
        --cuda-graphs ;;
    models)
      run clap_frontend 300 --device "$device" --clips 4 --batch-sizes 2 --numpy-clips 2 "${size[@]}"
      run whisper_frontend 300 --device "$device" --clips 4 --batch-size 2 --numpy-clips 2 "${size[@]}"
      run clip_models 300 --device "$device" --clips 4 --batch-size 2 --check 2 "${size[@]}"
      run dreamsim_batching 300 --device "$device" --pairs 4 --batch-size 2 --check 2 "${size[@]}" ;;
    scoring)
      run batched_scoring 600 --device "$device" --items 8 --whisper-items 4 --in-flight 4 --batch-size 4 --baseline-items 4 \
        --check 2 "${size[@]}" ;;
    score)
      run batched_scoring 600 --device "$device" --items 8 --in-flight 4 --batch-size 4 --baseline-items 4 --check 2 \
        --tasks clap --workers 1 --decode-processes 2 "${size[@]}"
      mv "$out/batched_scoring.log" "$out/score_decoding.log"
      run batched_scoring 600 --device "$device" --items 8 --in-flight 4 --batch-size 4 --baseline-items 4 --check 2 \
        --tasks clap --workers 2 --workers-only "${size[@]}"
      mv "$out/batched_scoring.log" "$out/score_workers.log" ;;
    embed)
      run clap_frontend 300 --device "$device" --clips 4 --batch-sizes 2 --numpy-clips 2 --model "${size[@]}" ;;
    workers)
      run batched_scoring 600 --device "$device" --items 8 --clips 3 --in-flight 4 --batch-size 4 --baseline-items 2 --check 2 \
        --tasks clap --workers "${SETTINGS:-2m,2}" --workers-only "${size[@]}"
      mv "$out/batched_scoring.log" "$out/score_workers.log" ;;
    all)
      run clap_frontend 300 --device "$device" --clips 4 --batch-sizes 2 --numpy-clips 2 "${size[@]}"
      run batched_scoring 600 --device "$device" --items 8 --in-flight 4 --batch-size 4 --baseline-items 4 --check 2 \
        --tasks clap --workers 1 "${size[@]}"
      mv "$out/batched_scoring.log" "$out/scoring_clap.log"
      run batched_scoring 600 --device "$device" --items 4 --in-flight 4 --batch-size 4 --baseline-items 2 --check 2 \
        --tasks whisper "${size[@]}"
      mv "$out/batched_scoring.log" "$out/scoring_whisper.log"
      run dreamsim_batching 300 --device "$device" --pairs 4 --batch-size 2 --check 2 "${size[@]}"
      run clip_models 300 --device "$device" --clips 4 --batch-size 2 --check 2 "${size[@]}"
      run whisper_frontend 300 --device "$device" --clips 4 --batch-size 2 --numpy-clips 2 "${size[@]}"
      run device_contention 300 --device "$device" --items 8 --in-flight 4 --batch-size 4 --prep-limits 2 --decode-processes 2 ;;
    profile)
      profile --device "$device" --items 16 --in-flight 8 --batch-size 4 ;;
    model-profile)
      model_profile 300 --device "$device" --items 8 --in-flight 4 --batch-size 4 --baseline-items 2 --check 2 --tasks clap \
        --workers 2m --workers-only "${size[@]}" ;;
    ceiling)
      run host_ceiling 300 --items 8 --in-flight 4 --batch-size 4 --launch-ms 0 --device-ms 1 --decode-processes "" --served 2 \
        --served-decode-processes "${PER_WORKER:-0}" ;;
  esac
  exit $status
fi
case $part in
  clap)  # the caps add up to 550 s: with set-up, one 600 s call
    device_tests
    run clap_frontend 100 --device "$device" --clips 512 --batch-sizes 128 --repeats 1
    clap_decoding
    # the host alone, around a simulated device as fast as the H100's CLAP (no GPU used)
    run host_ceiling 80 --items 1024 --decode-processes 8,12 --launch-ms 0,40 --device-ms 0,133
    run device_contention 100 --full --device "$device" --items 1024 --prep-limits "" --decode-processes 8,12 --cuda-graphs ;;
  models)
    # the caps add up to 510 s: with set-up, inside one 600 s call
    run clap_frontend 120 --device "$device" --clips 512 --batch-sizes 32,128 --repeats 2
    run whisper_frontend 90 --device "$device" --clips 512 --batch-size 64 --mels 128 --repeats 2
    run clip_models 200 --full --device "$device" --clips 1024 --batch-size 64 --repeats 2
    run dreamsim_batching 100 --full --device "$device" --pairs 512 --batch-size 64 --repeats 2 ;;
  scoring)
    run batched_scoring 540 --full --device "$device" --items 2048 --whisper-items 512 --in-flight 256 --batch-size 128 \
      --baseline-items 128 --repeats 1 --check 8 ;;
  score)  # CLAP only (Whisper reaches 0.98 of its backend with one worker); 150 s + 300 s
    clap_decoding
    # each worker process brings its own interpreter lock and model copy
    run batched_scoring 300 --full --device "$device" --items 2048 --in-flight 256 --batch-size 128 \
      --baseline-items 128 --repeats 1 --tasks clap --workers 2,4 --workers-only
    mv "$out/batched_scoring.log" "$out/score_workers.log" ;;
  embed)  # on an H100 host: about 20 s of imports, then about 150 s of rows
    run clap_frontend 240 --device "$device" --clips 2048 --batch-sizes 128 --numpy-clips 16 --repeats 1 ;;
  workers)  # one run of the benchmark (one set of checkpoints and clips), rows printed as each setting ends.  On an H200's
    # host (2026-11-28, 4,096 items) a setting took about 100 s, three fresh pools' start-up (17-19 s each) most of it, and
    # its rows flowed for under 5 s: too short a window to compare settings.  16,384 items (2,048 clip files used in turn)
    # give the middle of a run 10 s or more.  Eight and twelve workers keep their decoding (with 2 decoding processes each,
    # four workers gave half of eight)
    run batched_scoring 550 --full --device "$device" --items "${ITEMS:-16384}" --clips 2048 --in-flight 256 --batch-size 128 \
      --baseline-items 8 --repeats 1 --tasks clap --workers "${SETTINGS:-8m,12m}" --workers-only
    mv "$out/batched_scoring.log" "$out/score_workers.log" ;;
  all)  # in order of importance; the caps add up to 580 s (the call without device_contention took 434 s on an H100)
    run clap_frontend 60 --device "$device" --clips 512 --batch-sizes 128 --repeats 1
    run batched_scoring 150 --full --device "$device" --items 2048 --in-flight 256 --batch-size 128 --baseline-items 128 \
      --repeats 1 --check 8 --tasks clap --workers 1
    mv "$out/batched_scoring.log" "$out/scoring_clap.log"  # eight files at most come back from a device call
    run batched_scoring 150 --full --device "$device" --items 256 --in-flight 256 --batch-size 64 --baseline-items 32 \
      --repeats 1 --check 4 --tasks whisper
    mv "$out/batched_scoring.log" "$out/scoring_whisper.log"
    run dreamsim_batching 60 --full --device "$device" --pairs 512 --batch-size 64 --repeats 1
    run clip_models 70 --full --device "$device" --clips 512 --batch-size 64 --repeats 1
    run whisper_frontend 30 --device "$device" --clips 512 --batch-size 64 --mels 128 --repeats 1
    run device_contention 60 --full --device "$device" --items 1024 --prep-limits 4 --decode-processes 8 ;;
  profile)  # about a minute on an H100
    profile --full --device "$device" --items 1024 ;;
  model-profile)  # one setting of `workers` (about 100 s on an H200's host with 4,096 items), sampled
    model_profile 500 --full --device "$device" --items "${ITEMS:-16384}" --clips 2048 --in-flight 256 --batch-size 128 \
      --baseline-items 8 --repeats 1 --tasks clap --workers "${SETTINGS:-12m}" --workers-only ;;
  ceiling)  # 71 ms a batch of 128 is the H100's CLAP on its own (1,793 clips/s)
    run host_ceiling 400 --items 2048 --decode-processes 8 --launch-ms 0 --device-ms 0,71 --served 4,8 \
      --served-decode-processes "${PER_WORKER:-0}" ;;
esac
exit $status
