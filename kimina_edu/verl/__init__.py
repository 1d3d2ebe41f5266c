"""Chapter 8 — Kimina-Prover-RL on verl: data, reward entry point, recipe config, extensions.

Everything here except :mod:`kimina_edu.verl.dataset` and :mod:`kimina_edu.verl.check` runs in
the main environment; those two import verl and run in ``.venv-verl`` (``make verl-check``).
"""
