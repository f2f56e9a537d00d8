"""One run of a config in compiled segments: ``runner`` (``run_training``,
``resume_training``) checks its arguments (``checks``, ``run_spec``), locks
its directory (``lock``), finds where a resume starts (``recovery``), plans
the segments (``plan``), compiles and runs them (``segments``) and keeps its
directory's files (``run_files``, ``artifacts``); ``recovery`` also says what
a failed write left behind."""
