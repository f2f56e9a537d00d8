"""Jumanji tasks seen in a layout a small network learns from.

``jumanji/Maze-v0-egocentric`` is Jumanji's Maze-v0 (the same mazes,
dynamics, rewards and action mask) seen from the agent: for a maze of
``H × W`` cells,

* ``"walls"``: ``[2H - 1, 2W - 1]`` bool, the walls shifted so that the agent
  sits at the centre ``(H - 1, W - 1)``; cells beyond the maze are walls;
* ``"target"``: ``[2H - 1, 2W - 1]`` bool, one-hot at the target's place in
  the same frame;
* ``"action_mask"``: ``[4]`` bool, the legal moves, as Maze gives them.

Jumanji's own layout gives the walls in the maze's frame and the two
positions as separate numbers, so a dense layer must relate each position to
every wall it could stand beside. Seen from the agent, the walls next to it
and the target's direction are at fixed inputs wherever the agent stands.
The step count is left out (the time limit is ours, and a policy needs no
clock to find the target).
"""

import jax
import jax.numpy as jnp

from ondevice_rl.env.masks import ACTION_MASK
from ondevice_rl.env.spaces import Box
from ondevice_rl.env.wrappers import ObservationView
from ondevice_rl.envs.jumanji_adapter import JumanjiAdapter


class MazeEgocentric(ObservationView):
    """Maze seen from the agent (see the module docstring)."""

    def __init__(self, env: JumanjiAdapter):
        super().__init__(env)
        maze = env.jumanji_env
        self.rows, self.cols = int(maze.num_rows), int(maze.num_cols)
        self.name = f"{env.name}-egocentric"

    @property
    def frame(self) -> tuple[int, int]:
        """The egocentric frame's shape, ``(2H - 1, 2W - 1)``."""
        return 2 * self.rows - 1, 2 * self.cols - 1

    def view(self, obs: dict) -> dict:
        rows, cols = self.rows - 1, self.cols - 1
        row, col = obs["agent_position"]["row"], obs["agent_position"]["col"]
        padded = jnp.pad(
            obs["walls"], ((rows, rows), (cols, cols)), constant_values=True
        )
        walls = jax.lax.dynamic_slice(padded, (row, col), self.frame)
        target_row = obs["target_position"]["row"] - row + rows
        target_col = obs["target_position"]["col"] - col + cols
        target = jnp.zeros(self.frame, jnp.bool_).at[target_row, target_col].set(True)
        return {"walls": walls, "target": target, ACTION_MASK: obs[ACTION_MASK]}

    def observation_space(self, params):
        mask = self.env.observation_space(params)[ACTION_MASK]
        grid = Box(0, 1, self.frame, jnp.bool_)
        return {"walls": grid, "target": grid, ACTION_MASK: mask}


def maze_egocentric(**kwargs) -> MazeEgocentric:
    """``jumanji/Maze-v0-egocentric``; ``kwargs`` go to ``JumanjiAdapter``
    (``max_steps``, Maze's own keywords)."""
    return MazeEgocentric(JumanjiAdapter("Maze-v0", **kwargs))
