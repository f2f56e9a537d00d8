"""gymnasium's Taxi-v4 ported to JAX for ondevice_rl: ``env.py`` holds the
environment, ``sync.py`` what ``ondevice-rl check-env --reference`` needs."""
