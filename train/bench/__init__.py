"""``ondevice-rl bench``: how fast, and why fused.

* ``bench env``: random-policy env steps/s at several batch sizes
  (``--compare``: gymnax's own CartPole, gymnasium's vector env);
* ``bench train``: training SPS and compile time at several seed counts,
  for any registered learner (``--algo``; ``--reference PATH``: the same
  against a reference script, interleaved);
* ``bench host``: the same on-policy learner with the envs on the host vs
  fused;
* ``bench`` alone runs all three (``--quick``: small sizes).

Outputs: tables on stdout, ``bench.json`` and ``bench.png`` in ``--out``.
"""
