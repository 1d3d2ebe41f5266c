"""Chapter 3 — the offline pocket model: its corpus, tokenizer, pretraining and the shipped copy.

Weights cannot be downloaded on the course's machines (or on a plane), so the course has its
own base model: a small ``LlamaForCausalLM`` — SmolLM's architecture family — with a byte-level
BPE tokenizer. Honesty rule: its pretraining corpus holds the *questions* of the evaluated tasks
but never their answers; answers arrive only through SFT's ~200 teacher examples and RL's reward.
It does hold *restatements* of those questions (each premise's form and terms, no verdict): a hub
model like SmolLM can already read a premise back; a 1 M-parameter model cannot unless it
practises, and without reading, RL has nothing to improve.

Why it is **shipped** (``data/pocket/<recipe hash>/``) rather than built on each machine:
pretraining sums floating-point numbers in an order that depends on the CPU and the thread
count, so two machines building the same recipe get two different models — and every number the
course states downstream (SFT accuracy, the GRPO gain) then differs by machine. The shipped
files, with a ``record.json`` of their hashes, the recipe and the machine that built them, make
every learner start from the same bytes. ``make pocket`` rebuilds the recipe here and reports how
the rebuild compares with the shipped copy (:func:`compare_with_shipped`).

Recipes that are not shipped (a learner's own sizes, the tests' tiny ones) are built on demand
into ``cache_dir()/pocket/<recipe hash>`` — validated on use, rebuilt when damaged, and built by
one process at a time (:mod:`kimina_edu.cache`).
"""

from __future__ import annotations

import json
import math
import platform
import random
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kimina_edu.cache import build_once
from kimina_edu.errors import PocketModelError
from kimina_edu.rewards import chat_messages
from kimina_edu.runtime import cache_dir, file_sha256, package_versions, recipe_hash
from kimina_edu.tasks import SEEDS, make_entries, restatement

SHIPPED_DIR = Path(__file__).resolve().parent.parent / "data" / "pocket"
RECORD = "record.json"
MODEL_FILES = ("config.json", "generation_config.json", "model.safetensors", "tokenizer.json",
               "tokenizer_config.json", "chat_template.jinja", "build.json")

EVAL_TASKS = ("syllogism", "propositional_logic")
# Other reasoning-gym tasks whose full text (question, a short trace and the answer) the
# pocket model reads in pretraining: this is where it learns the <think>/<answer> shape.
FORMAT_TASKS = ("chain_sum", "basic_arithmetic", "letter_counting", "leg_counting", "gcd", "lcm", "count_bits")
SPECIAL_TOKENS = ["<pad>", "<|im_start|>", "<|im_end|>"]
TAG_TOKENS = ["<think>", "</think>", "<answer>", "</answer>"]
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)




@dataclass(frozen=True)
class PocketRecipe:
    """Everything that determines the pocket model; its hash names the cache folder.

    Sizes: ~1 M parameters (hidden 128, 4 layers, GQA 4/2 heads, tied embeddings) —
    SmolLM-135M's shape scaled down ~130× so that pretraining fits in minutes on 2 cores.

    ``pretrain_steps`` is set by what RL needs downstream, not by the loss (which flattens early):
    the model must restate a question's claim right most of the time, or GRPO can only learn the
    premises-only shortcut (``tasks.premises_only_accuracy``) and stalls near its ceiling.
    Shorter pretraining read fewer claims, and the GRPO goal then failed for most seeds
    (benchmarks/README.md, "Chapter 4: how RL was made to work on a 1 M-parameter model").
    """

    vocab_size: int = 2048
    hidden_size: int = 128
    intermediate_size: int = 384
    num_layers: int = 4
    num_heads: int = 4
    num_kv_heads: int = 2
    max_position_embeddings: int = 512
    questions_per_eval_task: int = 3000  # questions only, never answers
    restatements_per_eval_task: int = 1500  # "restate the question" documents, never a verdict
    docs_per_format_task: int = 400  # full chat documents with answers, other tasks
    pretrain_steps: int = 2400
    batch_size: int = 16
    seq_len: int = 256
    lr: float = 2e-3
    seed: int = SEEDS["pretrain"]
    version: int = 3  # bump when the corpus code changes

    @classmethod
    def smoke(cls) -> PocketRecipe:
        return cls(vocab_size=768, hidden_size=64, intermediate_size=128, num_layers=2, questions_per_eval_task=300,
                   restatements_per_eval_task=150, docs_per_format_task=40, pretrain_steps=150, batch_size=8, lr=3e-3)


def _generic_trace(entry: dict[str, Any]) -> str:
    """A short, task-agnostic think block for the format-teaching documents."""
    task = entry["metadata"]["source_dataset"].replace("_", " ")
    return f"This is a {task} question. I work it out step by step and check the result."


RESTATE_PROMPT = "Restate each statement in short form. Do not answer the question."


def pocket_corpus(recipe: PocketRecipe) -> list[str]:
    """Pretraining documents, each a chat transcript in the pocket model's template.

    Eval tasks: questions under the course's system prompt with no assistant turn, and
    restatement transcripts (another instruction, no verdict, no answer). Format tasks: full
    transcripts with ``<think>…</think><answer>…</answer>`` — where the shape is learned.
    """
    def chat(messages):
        return "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)

    docs = []
    for i, task in enumerate(EVAL_TASKS):
        items = make_entries(task, recipe.questions_per_eval_task, recipe.seed + i)
        for item in items:
            docs.append(chat(chat_messages(item["question"])))
        for item in items[: recipe.restatements_per_eval_task]:
            docs.append(chat(chat_messages(item["question"], system=RESTATE_PROMPT, answer=restatement(item))))
    for i, task in enumerate(FORMAT_TASKS):
        for item in make_entries(task, recipe.docs_per_format_task, recipe.seed + 100 + i):
            answer = f"<think>{_generic_trace(item)}</think>\n<answer>{item['answer']}</answer>"
            docs.append(chat(chat_messages(item["question"], answer=answer)))
    random.Random(recipe.seed).shuffle(docs)
    return docs


def train_tokenizer(corpus: list[str], vocab_size: int, *, special_tokens: list[str] = SPECIAL_TOKENS,
                    whole_tokens: list[str] = TAG_TOKENS, pad_token: str = "<pad>", bos_token: str = "<|im_start|>",
                    eos_token: str = "<|im_end|>", unk_token: str | None = None, chat_template: str = CHAT_TEMPLATE):
    """A byte-level BPE tokenizer trained on the corpus, wrapped as a transformers tokenizer.

    The defaults make the pocket model's; the tests build a SmolLM-shaped tokenizer with the same
    code and SmolLM's special tokens and template (``tests/smollm_shaped.py``). ``special_tokens``
    take the first ids, in order; ``whole_tokens`` are never split but, unlike special tokens, kept
    when decoding (the pocket model's ``<think>``/``<answer>`` tags).
    """
    from tokenizers import ByteLevelBPETokenizer
    from transformers import PreTrainedTokenizerFast

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(corpus, vocab_size=vocab_size, min_frequency=2,
                            special_tokens=list(special_tokens) + list(whole_tokens))
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe._tokenizer, pad_token=pad_token, bos_token=bos_token,
                                  eos_token=eos_token, unk_token=unk_token)
    if whole_tokens:
        tok.add_tokens(list(whole_tokens))  # whole tokens, but not "special": decoding keeps them
    tok.chat_template = chat_template
    tok.padding_side = "left"  # generation pads on the left
    return tok


def _pretrain(model, tok, corpus: list[str], recipe: PocketRecipe, progress: bool) -> list[float]:
    """Plain next-token pretraining on packed chunks of the corpus, cosine LR."""
    import torch
    from tqdm.auto import tqdm

    ids: list[int] = []
    for doc in corpus:
        ids.extend(tok(doc)["input_ids"])
    data = torch.tensor(ids, dtype=torch.long)
    gen = torch.Generator().manual_seed(recipe.seed)
    opt = torch.optim.AdamW(model.parameters(), lr=recipe.lr, weight_decay=0.01, betas=(0.9, 0.95))
    warmup = max(1, recipe.pretrain_steps // 20)
    losses = []
    model.train()
    bar = tqdm(range(recipe.pretrain_steps), desc="pretrain pocket model", disable=not progress)
    for step in bar:
        lr_scale = min(1.0, (step + 1) / warmup) * 0.5 * (1 + math.cos(math.pi * step / recipe.pretrain_steps))
        for group in opt.param_groups:
            group["lr"] = recipe.lr * max(lr_scale, 0.05)
        starts = torch.randint(0, len(data) - recipe.seq_len - 1, (recipe.batch_size,), generator=gen)
        batch = torch.stack([data[s : s + recipe.seq_len] for s in starts])
        loss = model(input_ids=batch, labels=batch).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
        bar.set_postfix(loss=f"{loss.item():.3f}")
    model.eval()
    return losses


def recipe_key(recipe: PocketRecipe) -> str:
    return recipe_hash(asdict(recipe))


def pocket_dir(recipe: PocketRecipe) -> Path:
    """Where a *built* (not shipped) pocket model of ``recipe`` lives."""
    return cache_dir() / "pocket" / recipe_key(recipe)


def shipped_dir(recipe: PocketRecipe) -> Path:
    return SHIPPED_DIR / recipe_key(recipe)


def is_shipped(recipe: PocketRecipe) -> bool:
    return (shipped_dir(recipe) / RECORD).exists()


def verify_shipped(recipe: PocketRecipe) -> Path:
    """The shipped folder of ``recipe`` after checking every file against ``record.json``.

    Raises :class:`PocketModelError` (one line: which file, what to do) on a missing or changed
    file — never a silent rebuild, which would hand this learner a different model.
    """
    path = shipped_dir(recipe)
    fix = f"restore it with `git checkout -- {path.relative_to(SHIPPED_DIR.parent.parent)}` or rebuild with `make pocket`"
    try:
        record = json.loads((path / RECORD).read_text())
        files = record["files"]
    except (OSError, ValueError, KeyError, TypeError):
        raise PocketModelError(f"the shipped pocket model's {path / RECORD} is missing or unreadable: {fix}") from None
    if record.get("recipe") != asdict(recipe):
        raise PocketModelError(f"{path / RECORD} was written for another recipe: {fix}")
    for name, digest in files.items():
        file = path / name
        if not file.is_file():
            raise PocketModelError(f"the shipped pocket model file {file} is missing: {fix}")
        if file_sha256(file) != digest:
            raise PocketModelError(f"the shipped pocket model file {file} does not match its record (sha256): {fix}")
    return path


def _build_into(out: Path, recipe: PocketRecipe, progress: bool) -> dict[str, Any]:
    """Pretrain ``recipe`` and save model, tokenizer and ``build.json`` into the folder ``out``."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    start = time.perf_counter()
    torch.manual_seed(recipe.seed)
    corpus = pocket_corpus(recipe)
    tok = train_tokenizer(corpus, recipe.vocab_size)
    config = LlamaConfig(
        vocab_size=len(tok), hidden_size=recipe.hidden_size, intermediate_size=recipe.intermediate_size,
        num_hidden_layers=recipe.num_layers, num_attention_heads=recipe.num_heads,
        num_key_value_heads=recipe.num_kv_heads, max_position_embeddings=recipe.max_position_embeddings,
        tie_word_embeddings=True, pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
    )
    model = LlamaForCausalLM(config)
    losses = _pretrain(model, tok, corpus, recipe, progress)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    build = {"recipe": asdict(recipe), "seconds": time.perf_counter() - start, "final_loss": losses[-1],
             "loss_curve": losses[:: max(1, len(losses) // 100)], "n_docs": len(corpus),
             "n_params": sum(p.numel() for p in model.parameters())}
    (out / "build.json").write_text(json.dumps(build))
    return build


def _built_problem(path: Path, recipe: PocketRecipe) -> str | None:
    """None when a built folder is usable, else why not (checked on every use)."""
    try:
        build = json.loads((path / "build.json").read_text())
    except (OSError, ValueError):
        return "has no readable build.json"
    if not isinstance(build, dict) or build.get("recipe") != asdict(recipe):
        return "was built from another recipe"
    try:
        json.loads((path / "config.json").read_text())
        json.loads((path / "tokenizer.json").read_text())
        from safetensors import safe_open

        with safe_open(str(path / "model.safetensors"), framework="pt") as fh:
            for key in fh.keys():  # noqa: SIM118 — a safetensors handle is not iterable
                fh.get_slice(key)  # reads the header and every tensor's offsets: truncation shows here
        if (path / "model.safetensors").stat().st_size < 8 + 4 * build.get("n_params", 0):
            return "has a truncated model.safetensors"
    except Exception as exc:  # noqa: BLE001 — any unreadable file means: rebuild
        return f"has an unreadable file ({type(exc).__name__})"
    return None


def build_pocket_model(recipe: PocketRecipe | None = None, *, force: bool = False, progress: bool = True) -> Path:
    """Build (or reuse) a pocket model of ``recipe`` in the cache; returns its folder.

    A damaged cached build is rebuilt with a one-line message; several processes building the
    same recipe wait for one another (a file lock) instead of colliding.
    """
    recipe = recipe or PocketRecipe()
    return build_once(pocket_dir(recipe), lambda out: _build_into(out, recipe, progress),
                      lambda path: _built_problem(path, recipe), force=force, what="pocket model")


def pocket_path(recipe: PocketRecipe | None = None, *, progress: bool = True) -> Path:
    """The folder to load for ``recipe``: the shipped copy (verified) when there is one, else a build."""
    recipe = recipe or PocketRecipe()
    if is_shipped(recipe):
        return verify_shipped(recipe)
    return build_pocket_model(recipe, progress=progress)


def pocket_build_info(recipe: PocketRecipe | None = None) -> dict[str, Any]:
    """``build.json`` of the model :func:`pocket_path` loads (shipped or built), plus where it came from."""
    recipe = recipe or PocketRecipe()
    path = pocket_path(recipe, progress=False)
    info = json.loads((path / "build.json").read_text())
    info["source"] = "shipped" if path.parent == SHIPPED_DIR else "built here"
    if info["source"] == "shipped":
        info["record"] = json.loads((path / RECORD).read_text())
    return info


def machine_facts() -> dict[str, Any]:
    """What a build depends on besides its recipe: the CPU, the thread count, the versions."""
    import os

    import torch

    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "torch_threads": torch.get_num_threads(),
            "platform": platform.platform(), "python": platform.python_version(),
            "versions": package_versions(["torch", "transformers", "tokenizers", "safetensors", "reasoning-gym"])}


def ship(recipe: PocketRecipe, source: Path) -> Path:
    """Copy a built model into ``data/pocket/<hash>/`` and write its ``record.json``."""
    dest = shipped_dir(recipe)
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    for name in MODEL_FILES:
        if (source / name).exists():
            shutil.copy2(source / name, dest / name)
    record = {"recipe": asdict(recipe), "recipe_hash": recipe_key(recipe),
              "files": {p.name: file_sha256(p) for p in sorted(dest.iterdir()) if p.name != RECORD},
              "built_on": machine_facts(), "built_at": time.strftime("%Y-%m-%d", time.gmtime())}
    (dest / RECORD).write_text(json.dumps(record, indent=1) + "\n")
    return dest


def compare_with_shipped(recipe: PocketRecipe, rebuilt: Path) -> dict[str, Any]:
    """How a fresh build differs from the shipped model: tokenizer, weights, pretraining loss."""
    from safetensors.torch import load_file

    shipped = verify_shipped(recipe)
    a, b = load_file(str(shipped / "model.safetensors")), load_file(str(rebuilt / "model.safetensors"))
    same_shapes = a.keys() == b.keys() and all(a[k].shape == b[k].shape for k in a)
    max_diff = max(float((a[k] - b[k]).abs().max()) for k in a) if same_shapes else float("inf")
    info_a = json.loads((shipped / "build.json").read_text())
    info_b = json.loads((rebuilt / "build.json").read_text())
    return {"tokenizer_identical": (shipped / "tokenizer.json").read_bytes() == (rebuilt / "tokenizer.json").read_bytes(),
            "weights_identical": same_shapes and max_diff == 0.0, "max_abs_weight_diff": max_diff,
            "final_loss_shipped": info_a["final_loss"], "final_loss_rebuilt": info_b["final_loss"],
            "shipped_on": json.loads((shipped / RECORD).read_text())["built_on"], "rebuilt_on": machine_facts()}


def rebuild_and_compare(recipe: PocketRecipe, *, progress: bool = True) -> dict[str, Any]:
    """Pretrain ``recipe`` again on this machine (a temporary folder) and compare with the shipped copy."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        _build_into(Path(tmp), recipe, progress)
        return compare_with_shipped(recipe, Path(tmp))


def main(argv: list[str] | None = None) -> int:
    """``make pocket``: rebuild the shipped recipes here and compare (``--ship`` replaces the shipped copy)."""
    import argparse
    import tempfile

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--ship", action="store_true", help="replace data/pocket/ with this machine's build")
    parser.add_argument("--smoke-only", action="store_true", help="only the tiny SMOKE recipe (seconds)")
    args = parser.parse_args(argv)
    recipes = [PocketRecipe.smoke()] + ([] if args.smoke_only else [PocketRecipe()])
    for recipe in recipes:
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "model"
            out.mkdir()
            build = _build_into(out, recipe, progress=True)
            print(f"recipe {recipe_key(recipe)}: built in {build['seconds']:.0f}s, final loss {build['final_loss']:.4f}")
            if args.ship:
                print("shipped to", ship(recipe, out))
            elif is_shipped(recipe):
                report = compare_with_shipped(recipe, out)
                print(json.dumps({k: v for k, v in report.items() if k not in ("shipped_on", "rebuilt_on")}, indent=1))
                print("shipped on:", report["shipped_on"]["cpu"], f"({report['shipped_on']['torch_threads']} threads)",
                      "| rebuilt on:", report["rebuilt_on"]["cpu"], f"({report['rebuilt_on']['torch_threads']} threads)")
            else:
                print("no shipped copy of this recipe to compare with")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
