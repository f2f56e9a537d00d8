"""The environment protocol and what is layered on one environment: the
``Environment``/``TimeStep`` protocol (``types``), spaces that sample inside
jitted code, wrappers (auto-reset, episode stats), resets only where an
episode ended, and action masks."""
