"""How sweep jobs run: side by side on one machine's cores (configs/hydra/launcher/parallel.yaml)."""
