"""Chapter 3 — load a policy: a hub model (SmolLM by default) or the offline pocket model.

Two paths, one interface: :func:`load_policy` returns ``(model, tokenizer)`` — a real
``transformers`` causal LM and tokenizer with a chat template — so every later chapter
(from-scratch GRPO, TRL, PEFT) runs on either without a branch.

The **pocket model** exists because weights cannot be downloaded on the course's CI
machines (or on a plane). It is a small ``LlamaForCausalLM`` — SmolLM's architecture family —
with a byte-level BPE tokenizer, both trained here from a seed in a few minutes on a CPU.
Honesty rule: its pretraining corpus holds the *questions* of the evaluated tasks but never
their answers; answers arrive only through SFT's ~200 teacher examples and RL's reward.
It does hold *restatements* of those questions (each premise's form and terms, no verdict):
a hub model like SmolLM can already read a premise back; a 1 M-parameter model trained for
three minutes cannot unless it practises, and without reading, RL has nothing to improve
(measured: without restatements the SFT'd pocket model wrote the right form with the wrong
nouns, and GRPO collapsed it to a constant answer).
"""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kimina_edu.rewards import SYSTEM_PROMPT
from kimina_edu.runtime import cache_dir, recipe_hash
from kimina_edu.tasks import SEEDS, make_entries, restatement

HUB_DEFAULT = "HuggingFaceTB/SmolLM-135M-Instruct"
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


class ModelUnavailableError(RuntimeError):
    """Raised with a one-line message that says what to do next."""


@dataclass(frozen=True)
class PocketRecipe:
    """Everything that determines the pocket model; its hash names the cache folder.

    Sizes: ~1 M parameters (hidden 128, 4 layers, GQA 4/2 heads, tied embeddings) —
    SmolLM-135M's shape scaled down ~130× so that pretraining fits in ~3 minutes on 2 cores
    (measured: 2 M parameters ran at 8.4 k tokens/s, 1 M at 16 k tokens/s on this machine).
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
    pretrain_steps: int = 600
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
            docs.append(chat([{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": item["question"]}]))
        for item in items[: recipe.restatements_per_eval_task]:
            docs.append(chat([{"role": "system", "content": RESTATE_PROMPT}, {"role": "user", "content": item["question"]},
                              {"role": "assistant", "content": restatement(item)}]))
    for i, task in enumerate(FORMAT_TASKS):
        for item in make_entries(task, recipe.docs_per_format_task, recipe.seed + 100 + i):
            answer = f"<think>{_generic_trace(item)}</think>\n<answer>{item['answer']}</answer>"
            docs.append(chat([{"role": "system", "content": SYSTEM_PROMPT},
                              {"role": "user", "content": item["question"]},
                              {"role": "assistant", "content": answer}]))
    random.Random(recipe.seed).shuffle(docs)
    return docs


def train_tokenizer(corpus: list[str], vocab_size: int):
    """A byte-level BPE tokenizer trained on the corpus, wrapped as a transformers tokenizer."""
    from tokenizers import ByteLevelBPETokenizer
    from transformers import PreTrainedTokenizerFast

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(corpus, vocab_size=vocab_size, min_frequency=2, special_tokens=SPECIAL_TOKENS + TAG_TOKENS)
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe._tokenizer, pad_token="<pad>", bos_token="<|im_start|>",
                                  eos_token="<|im_end|>", unk_token=None)
    tok.add_tokens(TAG_TOKENS)  # whole tokens, but not "special": decoding keeps them
    tok.chat_template = CHAT_TEMPLATE
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


def pocket_dir(recipe: PocketRecipe) -> Path:
    return cache_dir() / "pocket" / recipe_hash(asdict(recipe))


def build_pocket_model(recipe: PocketRecipe | None = None, *, force: bool = False, progress: bool = True) -> Path:
    """Build (or reuse) the pocket model; returns its folder (``save_pretrained`` layout).

    Cached under ``cache_dir()/pocket/<recipe hash>``; a folder whose ``build.json`` is
    missing, unreadable or from another recipe is rebuilt with a one-line message.
    """
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    recipe = recipe or PocketRecipe()
    path = pocket_dir(recipe)
    reason = _cache_problem(path, recipe)
    if reason is None and not force:
        return path
    if path.exists():
        print(f"pocket model cache at {path} {reason or 'forced'}: rebuilding")
        shutil.rmtree(path)
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
    tmp = path.with_name(path.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    tok.save_pretrained(tmp)
    build = {"recipe": asdict(recipe), "seconds": time.perf_counter() - start, "final_loss": losses[-1],
             "loss_curve": losses[:: max(1, len(losses) // 100)], "n_docs": len(corpus),
             "n_params": sum(p.numel() for p in model.parameters())}
    (tmp / "build.json").write_text(json.dumps(build))
    tmp.rename(path)
    return path


def _cache_problem(path: Path, recipe: PocketRecipe) -> str | None:
    """None when the cached build is usable, else why not."""
    if not path.exists():
        return "is missing"
    try:
        build = json.loads((path / "build.json").read_text())
    except (OSError, ValueError):
        return "is unreadable (no valid build.json)"
    if build.get("recipe") != asdict(recipe):
        return "was built from another recipe"
    if not (path / "config.json").exists() or not any(path.glob("*.safetensors")):
        return "is missing weight files"
    return None


def pocket_build_info(recipe: PocketRecipe | None = None) -> dict[str, Any]:
    return json.loads((pocket_dir(recipe or PocketRecipe()) / "build.json").read_text())


def _hub_reachable(timeout: float = 3.0) -> bool:
    if os.environ.get("HF_HUB_OFFLINE") == "1":
        return False
    import httpx

    try:
        return httpx.head("https://huggingface.co", timeout=timeout).status_code < 500
    except httpx.HTTPError:
        return False


def choose_model(model_id: str = "auto") -> tuple[str, str]:
    """Which model ``load_policy(model_id)`` will use, and why — without loading weights."""
    if model_id == "pocket":
        return "pocket", "MODEL_ID='pocket': the course's offline model, built on this machine"
    candidate = HUB_DEFAULT if model_id == "auto" else model_id
    if Path(candidate).is_dir():
        return candidate, f"local folder {candidate}"
    if _in_hf_cache(candidate):
        return candidate, f"{candidate} found in the local Hugging Face cache"
    if _hub_reachable():
        return candidate, f"{candidate} will be downloaded from the hub"
    if model_id == "auto":
        return "pocket", f"{HUB_DEFAULT} is not cached and the hub is unreachable: using the offline pocket model"
    raise ModelUnavailableError(
        f"cannot load {model_id!r}: not a local folder, not in the Hugging Face cache, and the hub is unreachable. "
        f"Use MODEL_ID='pocket' (built offline) or pre-download it with `huggingface-cli download {model_id}`."
    )


def _in_hf_cache(model_id: str) -> bool:
    try:
        from huggingface_hub import try_to_load_from_cache

        return isinstance(try_to_load_from_cache(model_id, "config.json"), str)
    except Exception:  # noqa: BLE001 — an invalid repo id is simply "not cached"
        return False


def lora_config(
    r: int = 32,
    alpha: int = 64,
    dropout: float = 0.0,
    target_modules: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj", "up_proj", "down_proj", "gate_proj"),
):
    """The reference article's LoRA: r=32, alpha=64, no dropout, every projection matrix."""
    from peft import LoraConfig

    return LoraConfig(r=r, lora_alpha=alpha, lora_dropout=dropout, target_modules=list(target_modules),
                      task_type="CAUSAL_LM", bias="none")


def base_model_path(model_id: str = "auto", pocket: PocketRecipe | None = None, *, verbose: bool = False) -> str:
    """A loadable folder or hub id for ``model_id``; builds the pocket model if that is the choice."""
    chosen, why = choose_model(model_id)
    if verbose:
        print(f"model: {chosen} — {why}")
    return str(build_pocket_model(pocket, progress=verbose)) if chosen == "pocket" else chosen


def load_policy(
    model_id: str = "auto",
    *,
    device: str | None = None,
    dtype: Any = None,
    lora: Any = None,
    recipe: PocketRecipe | None = None,
    adapter: str | os.PathLike | None = None,
    verbose: bool = True,
):
    """``(model, tokenizer)`` for ``model_id``: "auto", "pocket", a hub id or a local folder.

    ``adapter``: a folder with a saved adapter (trainable). ``lora``: a ``LoraConfig`` for a
    fresh trainable adapter. Both: the saved adapter is merged into the base first, so the
    fresh adapter trains on top of it and "adapters disabled" means the SFT'd model — the
    right KL reference for GRPO. The tokenizer pads on the left for generation.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from kimina_edu.runtime import resolve_device

    device = resolve_device(device)
    path = base_model_path(model_id, recipe, verbose=verbose)
    dtype = dtype or (torch.bfloat16 if device == "cuda" else torch.float32)
    try:
        tok = AutoTokenizer.from_pretrained(path)
        model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
    except OSError as exc:
        raise ModelUnavailableError(f"cannot load {path!r}: {str(exc).splitlines()[0]}") from None
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    tok.padding_side = "left"
    if adapter is not None:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, str(adapter), is_trainable=lora is None)
        if lora is not None:  # the SFT'd model becomes the base — and the KL reference
            model = model.merge_and_unload()
    if lora is not None:
        from peft import get_peft_model

        model = get_peft_model(model, lora)
    model.to(device)
    return model, tok


def tiny_random_llama(vocab_size: int = 64, seed: int = 0, **overrides):
    """A randomly initialised two-layer Llama for math demos and unit tests (no tokenizer)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = {"vocab_size": vocab_size, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
               "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 128}
    cfg.update(overrides)
    return LlamaForCausalLM(LlamaConfig(**cfg)).eval()


__all__ = [
    "HUB_DEFAULT",
    "ModelUnavailableError",
    "PocketRecipe",
    "build_pocket_model",
    "choose_model",
    "load_policy",
    "lora_config",
    "pocket_build_info",
    "pocket_corpus",
    "tiny_random_llama",
]


def chat_prompt(tok, question: str, system: str = SYSTEM_PROMPT) -> str:
    """The prompt text the policy sees: system + user turns through the chat template."""
    messages = [{"role": "system", "content": system}, {"role": "user", "content": question}]
    return tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)


def generate(model, tok, prompts: list[str], *, max_new_tokens: int, temperature: float = 0.0,
             top_p: float = 1.0, min_p: float = 0.0, num_return_sequences: int = 1, seed: int | None = None):
    """One batched, KV-cached ``generate`` call over many prompts.

    Returns ``(prompt_ids, completion_ids)``: per-sequence token lists (padding removed),
    completions ordered prompt-major (all samples of prompt 0 first). Greedy when
    ``temperature == 0``.
    """
    import torch

    if seed is not None:
        torch.manual_seed(seed)
    enc = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False).to(model.device)
    sample = temperature > 0
    kwargs = {"do_sample": sample, "max_new_tokens": max_new_tokens, "num_return_sequences": num_return_sequences,
                  "pad_token_id": tok.pad_token_id, "eos_token_id": tok.eos_token_id}
    if sample:
        kwargs.update(temperature=temperature, top_p=top_p, top_k=0)
        if min_p > 0:
            kwargs["min_p"] = min_p
    with torch.no_grad():
        out = model.generate(**enc, **kwargs)
    width = enc["input_ids"].shape[1]
    prompt_ids = [ids[m.bool()].tolist() for ids, m in zip(enc["input_ids"], enc["attention_mask"])]
    completions = []
    for row in out[:, width:].tolist():
        if tok.eos_token_id in row:
            row = row[: row.index(tok.eos_token_id) + 1]
        else:
            row = [t for t in row if t != tok.pad_token_id]
        completions.append(row)
    return prompt_ids, completions
