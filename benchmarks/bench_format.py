"""check_format on 10,000 realistic ~4 KB responses (goal: under 5 s), against a regex baseline
that scans with lazy patterns the way the recipe's code does — on realistic and adversarial input."""

import json
import random
import re
import time

from kimina_edu.lean.data import load_offline_problems
from kimina_edu.lean.examples import failing_examples
from kimina_edu.lean.format import check_format
from kimina_edu.lean.proof import extract_proof

# 1 MB of each adversarial shape (a lean4 block of `--` lines is the shape a quadratic scan never finishes on)
MB = 1_000_000
SHAPES = {"-- comment lines": "  -- c\n", "unclosed /-": "/-", "```lean4 openers": "```lean4\n",
          "```tactics openers": "```tactics\n", "<think> tags": "<think>", "---/- markers": "---/-/--",
          "theorem := floods": "theorem :="}


def adversarial_texts(unit: str) -> list[str]:
    body = unit * (MB // len(unit))
    two_tactics = "<think>\n```tactics\nx\n```\n```tactics\ny\n```\n"
    return [f"{two_tactics}</think>\n```lean4\n{body}\n```", f"{two_tactics}{body}</think>\n```lean4\nx\n```",
            body, f"```lean4\n{body}"]


def check_and_extract(text: str, stmt: str) -> None:
    check_format(text, stmt)
    extract_proof(text, stmt)


def regex_baseline(text: str) -> bool:
    """The first checks written with lazy regexes (the shape of the recipe's code)."""
    if not re.search(r"```lean4\s*([\s\S]+?)\s*```", text):
        return False
    after = text[text.find("<think>"):]
    return len(re.findall(r"<think>(.*?)</think>", after, re.DOTALL)) == 1 and \
        len(re.findall(r"```lean4\n(.*?)\n```", after, re.DOTALL)) == 1


def realistic(rng, problems):
    p = rng.choice(problems)
    case = rng.choice(failing_examples(p))
    filler = " ".join(rng.choice(["we", "note", "that", "the", "sum", "is", "even", "so", "x", "=", "2k", "+", "1"])
                      for _ in range(1100))
    text = case["response"].replace("<think>\n", "<think>\n" + filler + "\n", 1)
    return text, p["formal_statement"]


def timed(fn, items):
    start = time.perf_counter()
    for text, stmt in items:
        fn(text, stmt)
    return time.perf_counter() - start


def main():
    rng = random.Random(0)
    problems = load_offline_problems()
    items = [realistic(rng, problems) for _ in range(10_000)]
    mean_kb = sum(len(t) for t, _ in items) / len(items) / 1024
    ours = timed(check_format, items)
    base = timed(lambda t, s: regex_baseline(t), items)
    adversarial = [("<think>" * 5_000 + "```lean4\nx\n```", problems[0]["formal_statement"])]
    adv_ours = timed(check_format, adversarial)
    adv_base = timed(lambda t, s: regex_baseline(t), adversarial)
    stmt = problems[0]["formal_statement"]
    prose = [(t.replace(u, "x" * len(u)), stmt) for u in SHAPES.values() for t in adversarial_texts(u)[:1]]
    worst_name, worst = max(((name, timed(check_and_extract, [(t, stmt) for t in adversarial_texts(u)]) / 4)
                             for name, u in SHAPES.items()), key=lambda x: x[1])
    plain = timed(check_and_extract, prose) / len(prose)
    print(json.dumps({"benchmark": "format", "figures": [
        {"figure": f"1 MB adversarial, worst: {worst_name}", "value": worst, "unit": "s",
         "baseline": "1 MB of plain letters", "baseline_value": plain, "ratio": worst / plain, "goal": "< 1 s"},
        {"figure": f"10k responses (~{mean_kb:.1f} KB) check_format", "value": ours, "unit": "s",
         "baseline": "regex scan of the first checks", "baseline_value": base, "ratio": ours / base, "goal": "< 5 s"},
        {"figure": "35 KB of unclosed <think> tags", "value": adv_ours, "unit": "s", "baseline": "regex scan",
         "baseline_value": adv_base, "ratio": adv_ours / adv_base, "goal": "linear time"},
    ]}))


if __name__ == "__main__":
    main()
