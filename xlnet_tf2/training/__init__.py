"""Pretraining: optimizer and schedule, strategies, FLOPs/MFU, checkpoints, the loop."""
