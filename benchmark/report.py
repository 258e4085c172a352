"""bench.py's results against the targets, as Markdown tables."""

import os
import platform
from pathlib import Path
from typing import Any, Callable, Optional

import torch

from benchmark.recurrence import exponent_note
from benchmark.training import PARTS
from trainer.config import TrainConfig


def target(name: str, value: Optional[float], holds: Callable[[float], bool], shown: str) -> dict[str, Any]:
    if value is None:
        return {"target": name, "measured": None, "holds": None}
    return {"target": name, "measured": shown.format(value), "holds": holds(value)}


def check_targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The issue's targets for a 2-core CPU, as this run measured them; holds is None for what it did not measure.
    Memory grows linearly or quadratically as the measured exponent is nearer 1 or 2."""
    throughput, startup = results.get("throughput", {}), results.get("startup", {})
    speedup = results.get("attention_summary", {}).get("speedup", {}).get("step", {})
    exponent = results.get("attention_summary", {}).get("memory_exponent", {})
    step, layer = exponent.get("step", {}), exponent.get("layer", {})
    linear, quadratic, shown = (lambda v: v < 1.5), (lambda v: v >= 1.5), "exponent {:.2f}"
    full, fused_speedup = throughput.get("full_over_compute"), speedup.get(1024)
    return [
        target("full step >= 90% of compute-only throughput", full, lambda v: v >= 0.9, "{:.0%}"),
        target("fused step >= 2x faster than explicit at block_size 1024", fused_speedup, lambda v: v >= 2, "{:.2f}x"),
        target("fused path: step peak memory grows ~linearly", step.get("fused"), linear, shown),
        target("explicit path: step peak memory grows ~quadratically", step.get("explicit"), quadratic, shown),
        target("fused path: attention layer peak memory grows ~linearly", layer.get("fused"), linear, shown),
        target(
            "explicit path: attention layer peak memory grows ~quadratically", layer.get("explicit"), quadratic, shown
        ),
        target("warm startup to the first step <= 2.5 s", startup.get("warm_s"), lambda v: v <= 2.5, "{:.2f} s"),
        target("cold startup to the first step <= 15 s", startup.get("cold_s"), lambda v: v <= 15, "{:.2f} s"),
    ]


def processor_name() -> str:
    cpuinfo = Path("/proc/cpuinfo")  # Linux, where platform.processor() is often empty
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def machine(device: torch.device, config: TrainConfig) -> dict[str, Any]:
    return {
        "device": str(device),
        "name": torch.cuda.get_device_name(device) if device.type == "cuda" else processor_name(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "precision": config.trainer.precision.value,
        "compile": config.trainer.compile,
        "load_average_at_start": os.getloadavg()[0],  # above 0 when other work shares the machine
    }


def pipe_table(header: list[str], rows: list[list[str]]) -> str:
    """A Markdown pipe table: the header, its rule, then the rows."""
    return "\n".join("| " + " | ".join(cells) + " |" for cells in [header, ["---"] * len(header), *rows])


def spread(figures: dict[str, Any], name: str, shown: Callable[[float], str], scale: float = 1.0) -> str:
    """A figure's median, then the smallest and largest of its repeats: "1,234 (1,200-1,260)"."""
    low, high = figures[f"{name}_range"]
    return f"{shown(figures[name] * scale)} ({shown(low * scale)}-{shown(high * scale)})"


def measures_table(results: dict[str, Any]) -> list[list[str]]:
    rows = []
    thousands, percent, tenths = "{:,.0f}".format, "{:.0%}".format, "{:.1f}".format
    if throughput := results.get("throughput"):
        matmul = throughput["matmul_size"]
        rows += [
            [
                f"training, full step (batch {throughput['batch_size']} x block {throughput['block_size']}), tokens/s",
                spread(throughput, "full_step_tokens_per_s", thousands),
            ],
            [
                "training, compute only (one preloaded batch), tokens/s",
                spread(throughput, "compute_tokens_per_s", thousands),
            ],
            ["full step / compute only", spread(throughput, "full_over_compute", percent)],
            ["model FLOPs per token, training step (M)", f"{throughput['flops_per_token'] / 1e6:.2f}"],
            ["achieved by the full step, GFLOP/s", spread(throughput, "achieved_flops_per_s", tenths, 1e-9)],
            [f"matmul {matmul}x{matmul}, GFLOP/s", spread(throughput, "matmul_flops_per_s", tenths, 1e-9)],
            ["model-FLOPs utilisation", spread(throughput, "mfu", percent)],
        ]
    if startup := results.get("startup"):
        seconds = "{:.2f}".format
        rows += [
            ["train.py to its first step, cold (tokenizes the corpus), s", spread(startup, "cold_s", seconds)],
            ["train.py to its first step, warm (token cache), s", spread(startup, "warm_s", seconds)],
        ]
    if tokenization := results.get("tokenization"):
        speeds = tokenization["mb_per_s"] | {
            f"{name}_range": span for name, span in tokenization["mb_per_s_range"].items()
        }
        rows += [
            [f"tokenization, {name} ({tokenization['corpus_mb']:.2f} MB corpus), MB/s", spread(speeds, name, tenths)]
            for name in tokenization["mb_per_s"]
        ]
    return rows


def megabytes(value: Optional[float]) -> str:
    return "not measured" if value is None else f"{value:.0f}"


def attention_table(results: dict[str, Any], part: str) -> str:
    row = {(row["block_size"], row["fused"]): row for row in results["attention"]}
    speedup = results["attention_summary"]["speedup"][part]
    header = ["block_size", "batch", "fused ms", "explicit ms", "speedup", "fused peak MB", "explicit peak MB"]
    return pipe_table(
        header,
        [
            [
                str(block),
                str(row[block, True]["batch_size"]),
                spread(row[block, True], f"{part}_ms", "{:.1f}".format),
                spread(row[block, False], f"{part}_ms", "{:.1f}".format),
                f"{speedup[block]:.2f}x",
                megabytes(row[block, True][f"{part}_peak_mb"]),
                megabytes(row[block, False][f"{part}_peak_mb"]),
            ]
            for block in sorted(speedup)
        ],
    )


def recurrence_table(results: dict[str, Any]) -> str:
    """One row per length: each kind's ms (median, smallest-largest) and each recurrent kind's over attention's."""
    row = {(row["kind"], row["length"]): row for row in results["recurrence"]}
    summary = results["recurrence_summary"]
    kinds = list(dict.fromkeys(kind for kind, _ in row))
    ratios = summary["over_attention"]
    header = ["length", "batch"] + [f"{kind} ms" for kind in kinds] + [f"{kind} / attention" for kind in ratios]
    rows = [
        [str(length), str(row[kinds[0], length]["batch_size"])]
        + [spread(row[kind, length], "ms", "{:.1f}".format) for kind in kinds]
        + [f"{ratios[kind][length]:.2f}x" for kind in ratios]
        for length in summary["lengths"]
    ]
    return pipe_table(header, rows)


def bench_markdown(results: dict[str, Any]) -> str:
    """The results as Markdown, ready for the README."""
    about = results["machine"]
    parts = [
        f"{about['name']} ({about['device']}, {about['cpu_count']} cores, {about['torch_threads']} torch "
        f"threads), torch {about['torch']}, precision {about['precision']}, compile {about['compile']}; "
        f"load average {about['load_average_at_start']:.1f} at the start, {about['load_average_at_end']:.1f} "
        "at the end"
    ]
    if rows := measures_table(results):
        parts.append(pipe_table(["measure", "median (smallest-largest of the repeats)"], rows))
    if "attention" in results:
        exponent = results["attention_summary"].get("memory_exponent", {})
        for part, title in PARTS.items():
            parts += [f"Fused against explicit attention: {title}", attention_table(results, part)]
            if part in exponent:
                growth = ", ".join(f"{path} {value:.2f}" for path, value in exponent[part].items() if value is not None)
                small, large = exponent["between"]
                parts.append(
                    f"Peak memory growth from block_size {small} to {large}, as an exponent (1 linear, "
                    f"2 quadratic): {growth}."
                )
    if "recurrence" in results:
        summary = results["recurrence_summary"]
        parts += [
            f"Attention against recurrence: one layer of each kind, forward and backward, width "
            f"{results['model']['d_model']}, {summary['threads']} torch thread(s)",
            recurrence_table(results),
            exponent_note(summary) + ".",
        ]
    verdict = {True: "yes", False: "no", None: "-"}
    targets = [
        [target["target"], target["measured"] or "not measured", verdict[target["holds"]]]
        for target in results["targets"]
    ]
    parts.append(pipe_table(["target (2-core CPU)", "measured", "holds"], targets))
    return "\n\n".join(parts)
