"""Host-side services shared by runs, sweeps and the bench: the program
cache, the memory rule, interrupt handling, progress display and TensorBoard
event files."""
