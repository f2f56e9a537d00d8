"""Using a trained run: its policy (``load_policy``), evaluation summaries,
rendering and plots."""
