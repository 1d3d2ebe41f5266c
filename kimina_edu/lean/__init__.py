"""Chapters 6-7: the Kimina-Prover-RL reward - prompts, format checks, proof extraction, the
verifier client, feedback, and test doubles of kimina-lean-server (stand-in, fake Lean REPL)."""
