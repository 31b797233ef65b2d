"""Capture stage: unprofiled timing runs, Nsight Compute and Nsight Systems captures."""
