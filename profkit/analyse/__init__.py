"""Analyse stage: derived per-launch tables, per-kernel aggregates, cross-checks, diffs."""
