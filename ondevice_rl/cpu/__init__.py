"""What exists only for XLA:CPU: the scheduler flag that avoids a deadlock,
straight-line Threefry, kernel gradients laid out for the CPU's matmul,
per-platform layers and scans. Each piece is chosen when a program is
lowered, so a GPU or TPU program is the plain one."""
