"""The sections of bench.py, each measured in its own module, and the report it prints."""
