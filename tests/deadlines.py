"""The one deadline a headless notebook cell gets in the tests: long enough that only a hang reaches it.

Measured on a 2-core AMD EPYC with both cores taken by busy loops (benchmarks/loaded_test.py): the real
SmolLM2's SMOKE chapter 3 took 18 minutes in all, so a per-cell deadline of 600–900 s measured the machine,
not the notebook. Speed lives in benchmarks/; a test waits on the cell finishing.
"""

CELL_DEADLINE_S = 3600
