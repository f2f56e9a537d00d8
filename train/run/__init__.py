"""One run of a config in compiled segments, on one path for every caller:
``entry`` (``run_training`` from keywords, as the CLI) and ``runner``
(``train_from_config``, ``resume_training``) check the run once
(``request``: ``checks``, ``run_spec``, ``devices``), then ``runner.train``
locks its directory (``lock``), finds where a resume starts
(``recovery``), plans the segments (``plan``), compiles and runs them
(``segments``, ``loop``), keeps its directory's files (``run_files``,
``rows``, ``artifacts``) and returns a ``RunResult`` (``result``);
``recovery`` also says what a failed write left behind. ``devices`` puts a
data-parallel run over several devices."""
