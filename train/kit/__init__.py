"""The learner kit: the protocol every learner gives generic code, the
registry of learners, and the pieces learners share: env setup, the network
(``agent``), train state, optimiser step, schedules, ε-greedy, target
networks, the trained policies, the on-policy update (``on_policy``) and the
replay update (``replay_loop``, with what SAC and TD3 share in
``off_policy`` and ``off_policy_trainer``)."""
