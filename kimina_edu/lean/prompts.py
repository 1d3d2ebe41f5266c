"""Chapter 6 — the recipe's prompt (``prepare_data.py`` in project-numina/kimina-prover-rl)."""

from __future__ import annotations

from kimina_edu.rewards import chat_messages

SYSTEM_PROMPT = "You are an expert in mathematics and proving theorems in Lean 4."
USER_TEMPLATE = (
    "Think about and solve the following problems step by step in Lean 4.\n\n"
    "# Problem:\n{informal_problem}\n\n"
    "# Formal Statement:\n```lean4\n{formal_statement}\n```\n"
)


def build_messages(informal_problem: str, formal_statement: str) -> list[dict[str, str]]:
    """System + user messages, exactly as the recipe writes them into verl's parquet."""
    return chat_messages(USER_TEMPLATE.format(informal_problem=informal_problem.strip(),
                                              formal_statement=formal_statement.strip()), system=SYSTEM_PROMPT)


def render_prompt(tokenizer, informal_problem: str, formal_statement: str) -> str:
    """The prompt text the model sees, through its own chat template."""
    return tokenizer.apply_chat_template(build_messages(informal_problem, formal_statement), tokenize=False,
                                         add_generation_prompt=True)
