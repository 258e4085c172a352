"""The training run of train.py: each module owns one concern of it (see train.py for the order of the steps)."""
