"""The code that reads trained runs: finding them on disk (walk.py, runs.py), reading their checkpoints
(checkpoints.py), the trace of the attention on a text (trace.py, readings.py), what the model predicts and what
its look contributes (predictions.py), and text sampled from it (generation.py). attend.py, sample.py and
TensorBoard's Attention tab read runs through it; none of it needs the training machinery (DDP, TensorBoard's
writer, the progress bars). Importing the package itself imports nothing: the tab's is_active takes walk.py alone.
"""
