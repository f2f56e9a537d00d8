"""Checking an environment. ``check_env`` (``check_env.py``) runs, in order:
``static`` (nothing compiled), ``rollouts`` (one compiled rollout),
``params`` (other params sets through it), ``eager`` (its first steps op by
op) and, with a gymnasium reference, ``reference`` (spaces, resets, then step
by step). ``report`` holds what every check reports."""
