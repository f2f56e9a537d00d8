"""Files that must survive a kill or a full disk: checkpoints (orbax), a
directory's checksums, and the libraries' own noise when a write fails."""
