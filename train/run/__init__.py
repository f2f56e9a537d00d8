"""One run of a config in compiled segments: ``entry`` (``run_training``
from keywords, as the CLI), ``runner`` (``train_from_config``,
``resume_training``) checks its arguments (``checks``, ``run_spec``), locks
its directory (``lock``), finds where a resume starts (``recovery``), plans
the segments (``plan``), compiles and runs them (``segments``) and keeps its
directory's files (``run_files``, ``artifacts``); ``recovery`` also says what
a failed write left behind."""
