#!/usr/bin/env bash
# The CUDA paths no CPU test reaches, in one run of about 7 minutes on one GPU (its results on an H200 are in
# docs/benchmark.md#gpu):
#   - the default model and the leak preset in fp32, bf16 and fp16 (fp16 with its GradScaler),
#   - one torch.compile run, one one-GPU torchrun over nccl,
#   - tokens/s and model-FLOPs utilisation (bench.py) in each precision, beside the same on this machine's CPU,
#   - the lesson's serial cost: one attention, GRU and LSTM layer against the sequence length (bench.py's recurrence
#     section), where thousands of operations run at once.
#
#   PYTHON=.venv/bin/python OUT=gpu_check bash benchmark/gpu_check.sh
#
# PYTHON must have a CUDA build of torch and the project's dependencies (pip install -e ".[dev]" with CUDA torch).
# Every step runs whatever the last one did, with its own time limit; its log goes to $OUT/NAME.log. The end prints
# one table: each step's result, val/loss and val/loss_causal where it trains, tokens/s and MFU where it measures.
# MFU is bench.py's: achieved model FLOP/s over this device's own measured n x n matmul FLOP/s in that precision.
set -u
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python}
OUT=${OUT:-gpu_check}
mkdir -p "$OUT"
RESULTS="$OUT/results.tsv"
printf "step\tstatus\tseconds\n" > "$RESULTS"

step() {  # NAME LIMIT_S COMMAND...: run it, record pass/fail and its wall time
    local name=$1 limit=$2
    shift 2
    local started=$SECONDS
    echo "== $name: $*"
    if timeout "$limit" "$@" > "$OUT/$name.log" 2>&1; then status=ok; else status="FAILED($?)"; fi
    printf "%s\t%s\t%s\n" "$name" "$status" "$((SECONDS - started))" >> "$RESULTS"
    echo "   $status in $((SECONDS - started)) s"
}

SHORT=(trainer.max_steps=300 trainer.eval_interval=100 trainer.ckpt_interval=300 trainer.device=cuda)

step environment 60 bash -c "nvidia-smi; $PYTHON -c 'import torch; print(torch.__version__, torch.version.cuda, \
torch.cuda.is_available(), torch.cuda.get_device_name(0), torch.cuda.is_bf16_supported())'"
for precision in fp32 bf16 fp16; do
    step "default_$precision" 180 "$PYTHON" train.py "${SHORT[@]}" "trainer.precision=$precision" \
        "hydra.run.dir=$OUT/runs/default_$precision"
    step "leak_$precision" 240 "$PYTHON" train.py +experiment=leak trainer.device=cuda "trainer.precision=$precision" \
        "hydra.sweep.dir=$OUT/runs/leak_$precision"
    step "bench_$precision" 180 "$PYTHON" bench.py bench.sections=[throughput] trainer.device=cuda \
        "trainer.precision=$precision" "bench.json_path=$OUT/bench_$precision.json" "hydra.run.dir=$OUT/bench/$precision"
done
step compiled 420 "$PYTHON" train.py "${SHORT[@]}" trainer.compile=true "hydra.run.dir=$OUT/runs/compiled"
step bench_compiled 300 "$PYTHON" bench.py bench.sections=[throughput] trainer.device=cuda trainer.compile=true \
    "bench.json_path=$OUT/bench_compiled.json" "hydra.run.dir=$OUT/bench/compiled"
# torchrun over nccl with one process: the process group, DistributedDataParallel and the rank-0-only writing.
step torchrun_nccl 240 "$PYTHON" -m torch.distributed.run --standalone --nproc_per_node=1 train.py "${SHORT[@]}" \
    "hydra.run.dir=$OUT/runs/torchrun_nccl"
step bench_cpu 300 "$PYTHON" bench.py bench.sections=[throughput] trainer.device=cpu \
    "bench.json_path=$OUT/bench_cpu.json" "hydra.run.dir=$OUT/bench/cpu"
step recurrence_gpu 300 "$PYTHON" bench.py bench.sections=[recurrence] trainer.device=cuda \
    "bench.json_path=$OUT/recurrence_gpu.json" "hydra.run.dir=$OUT/bench/recurrence"

"$PYTHON" - "$OUT" <<'EOF'
"""The table: every step's status and time, the final losses of the runs, and the benchmarks' medians."""
import csv
import json
import sys
from pathlib import Path

from summary.runs import read_runs

out = Path(sys.argv[1])
print("\n| step | status | s | val/loss | val/loss_causal | tokens/s (train.py) | tokens/s (bench) | MFU |")
print("|---|---|---|---|---|---|---|---|")
for row in csv.DictReader((out / "results.tsv").open(), delimiter="\t"):
    name, cells = row["step"], ["", "", "", "", ""]
    runs_dir = out / "runs" / name
    if runs_dir.is_dir():
        try:
            runs = read_runs([runs_dir])
            cells[0] = " / ".join(f"{run.final('val/loss'):.3f}" for run in runs if run.final("val/loss") is not None)
            cells[1] = " / ".join(f"{run.final('val/loss_causal'):.3f}" for run in runs
                                  if run.final("val/loss_causal") is not None)
            speeds = [value for run in runs for _, value in run.curves.get("perf/tokens_per_sec", [])[1:]]
            cells[2] = f"{sorted(speeds)[len(speeds) // 2]:,.0f}" if speeds else ""
        except FileNotFoundError:
            pass
    bench = out / f"{name}.json"
    if bench.exists():
        throughput = json.loads(bench.read_text()).get("throughput")
        if throughput:  # the recurrence section's table is in its log
            cells[3] = f"{throughput['full_step_tokens_per_s']:,.0f}"  # medians over the repeats
            cells[4] = f"{throughput['mfu']:.1%}"
    print(f"| {name} | {row['status']} | {row['seconds']} | " + " | ".join(cells) + " |")
print("\nleak runs: model.causal=True / False; the unmasked run's val/loss_causal must stay far above the masked one's")
print(f"the serial cost on this GPU: the table at the end of {out / 'recurrence_gpu.log'}")
EOF
