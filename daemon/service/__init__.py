"""The completion service: sessions, prompting, scheduling and post-processing (no protocol types)."""
