"""Render stage: terminal tables, JSON/CSV, HTML reports."""
