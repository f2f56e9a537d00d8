"""The learner kit: the protocol every learner gives generic code, the
registry of learners, and the pieces learners share (env setup, train state,
optimiser step, schedules, ε-greedy, the on-policy update, minibatches)."""
