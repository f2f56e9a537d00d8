"""One run of a config in compiled segments: validation, the segment plan,
the segment programs, checkpoints and the run directory's files."""
