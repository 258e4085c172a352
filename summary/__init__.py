"""Sweep summaries: a table and figures of many runs, read back from their TensorBoard events.

summarize.summarize() finds the runs (directories holding events files) under some directories and writes summary.csv,
summary.md and summary.png, and summary_KEY.png for a swept number to plot the final values against. report.py calls
it for any directories; summary.callback.SweepSummary, a Hydra callback registered in configs/train.yaml, calls it
for the sweep directory at the end of every multirun.
"""
