# Two commands on a fresh machine: `make test` and `make train`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test test-slow train bench bench-gpu results search-evidence recipe-seeds recipe-seeds-fresh recipe-seeds-fresh-long recipe-seeds-long lint docs clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	# popgym-arcade without its stable-gymnax, which would replace gymnax.
	$(BIN)/pip install --quiet --no-deps 'popgym-arcade==0.0.7'
	touch $(STAMP)

# Two pytest workers, XLA's backend optimisation off and XLA:CPU's elemental
# emitters instead of its fusion emitters: compiles dominate the default suite
# (tiny programs), and these flags more than halve them (tests/suite_flags.py).
# A module whose tests share module-scoped programs marks itself with an
# xdist_group, so that they are built on one worker, not on both.
# The suite starts about thirty Python processes that import the library
# (CLI runs, signals, simulated devices): Python writes its bytecode once
# (__pycache__, ignored by git) even where the environment turns that off.
TEST_XLA_FLAGS := --xla_backend_optimization_level=0 --xla_cpu_use_fusion_emitters=false
test: $(STAMP)
	PYTHONDONTWRITEBYTECODE= JAX_PLATFORMS=cpu XLA_FLAGS="$(XLA_FLAGS) $(TEST_XLA_FLAGS)" \
		$(BIN)/python -m pytest -q -n 2 --dist loadgroup

test-slow: $(STAMP)
	PYTHONDONTWRITEBYTECODE= JAX_PLATFORMS=cpu $(BIN)/python -m pytest -q -m slow

train: $(STAMP)
	$(BIN)/ondevice-rl train --env CartPole-v1 --total-timesteps 500000 --seed 0

bench: $(STAMP)
	$(BIN)/ondevice-rl bench --quick --out runs/bench

# The GPU suite on a CUDA 12 machine (tens of minutes): JAX's CUDA plugin at
# the installed JAX's version, then `ondevice-rl bench --suite gpu` into
# runs/bench-gpu; REFERENCES=DIR adds the reference_<learner>.py scripts there.
bench-gpu: $(STAMP)
	$(BIN)/pip install --quiet "jax[cuda12]==$$($(BIN)/python -c 'import jax; print(jax.__version__)')"
	$(BIN)/ondevice-rl bench --suite gpu --out runs/bench-gpu $(if $(REFERENCES),--references $(REFERENCES))

# Every shipped recipe (hours on CPU), then README's results table and
# docs/results/*.png; ONLY="name ..." trains a few, the table keeps the rest.
results: $(STAMP)
	$(BIN)/pip install --quiet -e '.[brax,mjx]'
	$(BIN)/python -m ondevice_rl.train.recipes.results $(if $(ONLY),--only $(ONLY))

# Search strategies compared (hours on CPU): random search, PBT and
# successive halving on PPO Acrobot at a short budget (16 members x 20
# search seeds; halving judged after four rounds on two disjoint sets of 20,
# joined) and on DQN CartPole (16 x 5), handed-back members evaluated on 32
# episodes; the docs' figures (benchmarks/, not installed).
search-evidence: $(STAMP)
	$(BIN)/python benchmarks/search_evidence.py

# A recipe's final return over SETS disjoint sets of PER_SET seeds (default 3
# of 8): IQM, 95% CI and the worst seed per set, and the final policies'
# deterministic evaluation on EVAL episodes (RECIPES="cartpole_pqn ...";
# default: classic control), into docs/results/NAME_seeds.json, the recipes
# page's table and README's. The grid worlds take 8-25 min per 4 seeds:
# make recipe-seeds RECIPES="navix_empty_8x8_ppo xminigrid_empty_8x8_ppo"
# SETS=2 PER_SET=4.
RECIPES ?= cartpole_ppo cartpole_a2c cartpole_dqn cartpole_pqn acrobot_ppo acrobot_a2c acrobot_dqn pendulum_ppo pendulum_sac pendulum_td3
SETS ?= 3
PER_SET ?= 8
EVAL ?= 32
recipe-seeds: $(STAMP)
	for r in $(RECIPES); do \
		$(BIN)/ondevice-rl seeds $$r --keys 0..$$(( $(SETS) * $(PER_SET) - 1 )) --sets $(SETS) \
			--eval-episodes $(EVAL) --out runs/seeds/$$r \
		&& cp runs/seeds/$$r/seed_sets.json docs/results/$${r}_seeds.json || exit 1; \
	done
	$(BIN)/python -m ondevice_rl.train.recipes.results --table-only

# The same recipes on keys none of them was tuned or stated on (FRESH), beside
# the stated figure in both tables: docs/results/NAME_fresh.json.
FRESH ?= 100..107
recipe-seeds-fresh: $(STAMP)
	for r in $(RECIPES); do \
		$(BIN)/ondevice-rl seeds $$r --keys $(FRESH) --eval-episodes $(EVAL) \
			--out runs/fresh/$$r \
		&& cp runs/fresh/$$r/seed_sets.json docs/results/$${r}_fresh.json || exit 1; \
	done
	$(BIN)/python -m ondevice_rl.train.recipes.results --table-only

# The recipes that take hours per seed on a CPU, over seeds 0-3 (one set of
# LONG_SEEDS), checkpointed after every round: run it again to resume where it
# stopped. On 2 cores 4 seeds (2 per core) take about as long as 3 on one
# device (MinAtar PPO: 11.96 s against 11.46 s for 4 updates).
LONG_RECIPES ?= minatar_breakout_ppo minatar_space_invaders_ppo minatar_breakout_pqn \
	minatar_space_invaders_pqn minatar_breakout_dqn minatar_space_invaders_dqn \
	craftax_classic_symbolic_ppo mjx_cheetah_run_sac brax_hopper_sac
LONG_SEEDS ?= 4
recipe-seeds-long: $(STAMP)
	for r in $(LONG_RECIPES); do \
		$(BIN)/ondevice-rl seeds $$r --keys 0..$$(( $(LONG_SEEDS) - 1 )) \
			--eval-episodes $(EVAL) --checkpoint --out runs/seeds/$$r \
		&& cp runs/seeds/$$r/seed_sets.json docs/results/$${r}_seeds.json || exit 1; \
	done
	$(BIN)/python -m ondevice_rl.train.recipes.results --table-only

# Every other row on keys no recipe was tuned on (FRESH_LONG, default
# 100..103), checkpointed, into docs/results/NAME_fresh.json and both tables.
# On 2 cores: the brax, MJX and grid-world rows take 2-25 min each; MinAtar,
# Craftax PPO and the off-policy MuJoCo rows 30 min to 2.5 h each.
FRESH_LONG ?= 100..103
FRESH_LONG_RECIPES ?= mjx_cartpole_balance_ppo brax_inverted_pendulum_ppo mjx_cheetah_run_ppo \
	brax_hopper_ppo xminigrid_empty_8x8_ppo navix_empty_8x8_ppo craftax_classic_symbolic_pqn_gru \
	jumanji_maze_ppo popgym_cartpole_easy_ppo pgx_minatar_breakout_ppo $(LONG_RECIPES)
recipe-seeds-fresh-long: $(STAMP)
	$(BIN)/pip install --quiet -e '.[brax,mjx]'
	for r in $(FRESH_LONG_RECIPES); do \
		$(BIN)/ondevice-rl seeds $$r --keys $(FRESH_LONG) --eval-episodes $(EVAL) \
			--checkpoint --out runs/fresh/$$r \
		&& cp runs/fresh/$$r/seed_sets.json docs/results/$${r}_fresh.json || exit 1; \
	done
	$(BIN)/python -m ondevice_rl.train.recipes.results --table-only

# The documentation site (mkdocs-material, API reference from the
# docstrings) into site/; strict: a broken link or reference fails.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

lint: $(STAMP)
	$(BIN)/ruff check ondevice_rl envs train tests benchmarks
	$(BIN)/ruff format --check ondevice_rl envs train tests benchmarks

clean:
	rm -rf $(VENV) runs .pytest_cache site build/docs-src
