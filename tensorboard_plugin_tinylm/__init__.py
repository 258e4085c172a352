"""TensorBoard's Attention tab for tinylm: each run's attention weights on a text you type, with the lesson's steps.

TensorBoard loads `plugin.AttentionPlugin` through the `tensorboard_plugins` entry point (pyproject.toml). The plugin
imports nothing of tinylm, nor torch, until the tab asks for something: TensorBoard starts as fast as without it.
"""
