"""The one deadline a headless notebook cell gets in the tests: long enough that only a hang reaches it.

Measured on a 2-core AMD EPYC with both cores taken by busy loops (benchmarks/loaded_test.py): the real
SmolLM2's SMOKE chapter 3 took 18 minutes in all, so a per-cell deadline of 600–900 s measured the machine,
not the notebook. Speed lives in benchmarks/; a test waits on the cell finishing.
"""

CELL_DEADLINE_S = 3600

# a wait on a browser or a server (JupyterLab starting, a widget redrawing after a keystroke): the same rule.
# A 90-s start and 10-s redraws failed on the busy 2-core box; every wait only catches a hang.
WAIT_DEADLINE_S = 600
