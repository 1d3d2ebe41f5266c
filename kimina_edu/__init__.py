"""kimina-edu: the package behind the course's notebooks (README.md has the map)."""

import warnings

# One place for library noise the course cannot fix: peft and TRL 1.16 read a model property that
# transformers 5 deprecated (`is_gradient_checkpointing`), which prints a FutureWarning into every
# notebook that builds a LoRA model. Matched by message, so every other warning still shows.
warnings.filterwarnings("ignore", message=".*`is_gradient_checkpointing` is deprecated.*", category=FutureWarning)
