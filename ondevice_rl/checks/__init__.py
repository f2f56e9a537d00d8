"""Checking an environment: ``check_env`` (static checks, then one compiled
rollout, then params), a port against its gymnasium reference
(``reference``, ``conformance``), and how every check reports (``report``)."""
