# The filled-in stubs of the course notebooks ("stub, grade, import": CONVENTIONS.md).
#
# Each section below is the whole source of one `stub`-tagged cell, the one whose metadata says
# "kimina": {"solution": "<name>"}. `make course` and the tests run a copy of each notebook with its stubs
# replaced by these (kimina_edu/stubs.py); `make lab` gives you the stubs. Try a stub before reading its
# solution: the grader cell after it tells you which case your version gets wrong.
# Not importable on its own: each section runs in its notebook, with that notebook's names (torch, cfg, …).

# %% solution: my_extract_answer
def my_extract_answer(text):
    """The stripped text of the last <answer>…</answer> block, or None."""
    close = text.rfind("</answer>")
    start = text.rfind("<answer>", 0, close) if close != -1 else -1
    return None if start == -1 else text[start + len("<answer>"):close].strip()

# %% solution: my_format_reward
def my_format_reward(text):
    """1.0 for exactly one think block, then exactly one answer block, nothing but whitespace outside."""
    tags = ("<think>", "</think>", "<answer>", "</answer>")
    if any(text.count(t) != 1 for t in tags):
        return 0.0
    a, b, c, d = (text.index(t) for t in tags)
    if not a < b < c < d:
        return 0.0
    outside = text[:a] + text[b + len("</think>"):c] + text[d + len("</answer>"):]
    return 1.0 if outside.strip() == "" else 0.0

# %% solution: my_group_advantages
def my_group_advantages(rewards, eps=1e-4, unbiased=True):
    """(r - mean) / (std + eps) within each row (one question's group); an all-equal row is exactly 0."""
    centered = rewards - rewards.mean(dim=1, keepdim=True)
    all_equal = rewards.max(dim=1, keepdim=True).values == rewards.min(dim=1, keepdim=True).values
    centered = centered.masked_fill(all_equal, 0.0)
    return centered / (rewards.std(dim=1, keepdim=True, correction=1 if unbiased else 0) + eps)

# %% solution: my_policy_loss
def my_per_token_loss(logp, old_logp, advantages, eps_low=0.2, eps_high=0.2):
    """The negative clipped surrogate per token: [N, T]."""
    ratio = torch.exp(logp - old_logp)
    a = advantages[:, None]
    return -torch.min(ratio * a, torch.clamp(ratio, 1 - eps_low, 1 + eps_high) * a)


def my_aggregate(per_token, mask, loss_type, max_len=None):
    """One scalar from [N, T]: grpo, bnpo/dapo or dr_grpo; padding (mask 0) counts nowhere."""
    masked = per_token * mask
    if loss_type == "grpo":
        return (masked.sum(1) / mask.sum(1)).mean()
    if loss_type in ("bnpo", "dapo"):
        return masked.sum() / mask.sum()
    if loss_type == "dr_grpo":
        return masked.sum() / (per_token.shape[0] * max_len)
    raise ValueError(loss_type)

# %% solution: my_kl_k3
def my_kl_k3(logp, ref_logp):
    """Schulman's k3 per token: exp(δ) − δ − 1 with δ = ref_logp − logp."""
    delta = ref_logp - logp
    return torch.exp(delta) - delta - 1

# %% solution: my_completion_logprobs
def my_completion_logprobs(model, prompt, completion):
    """log π(token) for each completion token, given the prompt and the completion before it: [len(completion)]."""
    ids = torch.tensor([prompt + completion], device=model.device)
    logp = torch.log_softmax(model(input_ids=ids).logits[0, :-1].float(), -1)
    targets = ids[0, 1:]
    return logp.gather(-1, targets[:, None])[:, 0][len(prompt) - 1:]  # the completion's tokens only

# %% solution: my_grpo_loss
from kimina_edu.grpo import aggregate


def my_grpo_loss(model, batch):
    """The loss of one minibatch step on rollouts from the buffer: new log-probs with gradients, ratio to the
    stored π_old, clip, aggregate."""
    logp = [my_completion_logprobs(model, r.prompt_ids, r.completion_ids) for r in batch]
    T = max(len(x) for x in logp)
    new = torch.stack([torch.nn.functional.pad(x, (0, T - len(x))) for x in logp])
    mask = torch.stack([torch.arange(T, device=new.device) < len(x) for x in logp]).float()
    # π_old: the log-probs stored when the buffer was sampled; after a step on this buffer they differ from new
    old = torch.stack([torch.nn.functional.pad(torch.tensor(r.old_logp, device=new.device), (0, T - len(r.old_logp)))
                       for r in batch])
    ratio = torch.exp(new - old)
    a = torch.tensor([r.advantage for r in batch], device=new.device)[:, None]
    eps_high = cfg.eps_high if cfg.eps_high is not None else cfg.eps_low
    per_token = -torch.min(ratio * a, ratio.clamp(1 - cfg.eps_low, 1 + eps_high) * a)
    return aggregate(per_token, mask, cfg.loss_type, cfg.max_new_tokens)

# %% solution: my_grpo_iteration
import random

from kimina_edu.grpo import group_advantages, policy_loss
from kimina_edu.logprobs import Rollout, completion_logprobs, pad_batch


def my_grpo_iteration(model, optimizer, task, questions, cfg, rng: random.Random):
    """One GRPO iteration: collect → score → group advantages → old log-probs into the buffer → learn on it."""
    G = cfg.group_size
    prompt_ids, completions = task.sample(model, questions)  # 1. collect: G completions per question
    rewards = torch.tensor([task.reward(questions[i // G], c) for i, c in enumerate(completions)])  # 2. score
    advantages = group_advantages(rewards.view(len(questions), G), scale=cfg.scale).flatten()  # 3. within each group
    buffer = [Rollout(prompt_ids[i // G], c, [], float(a), float(r), False)
              for i, (c, a, r) in enumerate(zip(completions, advantages, rewards))]
    with torch.no_grad():  # 4. π_old: the sampling policy's log-probs, stored before any step moves the weights
        old, _ = completion_logprobs(model, buffer, task.pad_id)
    for r, lp in zip(buffer, old):
        r.old_logp = lp[: len(r.completion_ids)].tolist()
    log = {"reward_mean": rewards.mean().item(), "updates": 0, "clip_frac": 0.0}
    buffer = [r for r in buffer if r.advantage != 0.0]  # no advantage, no gradient
    if not buffer:
        return log
    params = [p for p in model.parameters() if p.requires_grad]
    clipped = []
    model.train()
    for _ in range(cfg.epochs):  # 5. learn: shuffled minibatches, one optimizer step per grad_accum of them
        order = list(range(len(buffer)))
        rng.shuffle(order)
        minibatches = [[buffer[i] for i in order[k: k + cfg.minibatch_size]]
                       for k in range(0, len(order), cfg.minibatch_size)]
        for start in range(0, len(minibatches), cfg.grad_accum):
            step = minibatches[start: start + cfg.grad_accum]
            optimizer.zero_grad()
            for mb in step:
                logp, mask = completion_logprobs(model, mb, task.pad_id)
                stored = pad_batch(mb, task.pad_id)[3].to(logp.device)
                adv = torch.tensor([r.advantage for r in mb], device=logp.device)
                loss, stats = policy_loss(logp, stored, adv, mask, loss_type=cfg.loss_type, eps_low=cfg.eps_low,
                                          eps_high=cfg.eps_high, max_len=cfg.max_new_tokens)
                (loss / len(step)).backward()  # the step's gradient is the mean over its minibatches
                clipped.append(stats["clip_frac_low"] + stats["clip_frac_high"])
            torch.nn.utils.clip_grad_norm_(params, cfg.max_grad_norm)
            optimizer.step()
            log["updates"] += 1
    model.eval()
    log["clip_frac"] = sum(clipped) / len(clipped)
    return log

# %% solution: my_surrogate
def my_surrogate(logp, old_logp, advantages, kind, cap=5.0, tau_pos=1.0, tau_neg=1.05):
    """The per-token loss [N, T] of CISPO or SAPO."""
    ratio = torch.exp(logp - old_logp)
    a = advantages[:, None]
    if kind == "cispo":
        return -torch.clamp(ratio, max=cap).detach() * a * logp
    tau = torch.where(a > 0, tau_pos, tau_neg)
    return -torch.sigmoid(tau * (ratio - 1)) * 4 / tau * a


# %% solution: my_feedback
def my_feedback(code, result, max_errors=3):
    """The recipe's feedback text for a server that numbers lines from after the header (server 2.0.0)."""
    lines = code.splitlines()
    messages = (result.get("response") or {}).get("messages") or []
    errors = [m for m in messages if isinstance(m, dict) and m.get("severity") == "error"][:max_errors]
    parts = []
    for i, msg in enumerate(errors, 1):
        text = f"# Error {i}:\nError message: \n{str(msg.get('data', 'Unknown error')).strip()}\n\n"
        if isinstance(msg.get("pos"), dict) and isinstance(msg["pos"].get("line"), int):
            at = msg["pos"]["line"] + header_line_count(code) - 1  # 0-based line of `code`
            window = [f"{n + 1:03d}{' >' if n == at else '  '}| {lines[n].replace('count_heartbeats in', '')}"
                      for n in range(max(0, at - 2), min(len(lines), at + 3))]
            text += "Lean 4 code snippet with error:\n```lean4\n" + "".join(w + "\n" for w in window) + "```\n"
        parts.append(text)
    if parts:
        return "".join(parts)
    error = result.get("error")
    return f"# System Error:\nError message: \n{error.strip()}\n\n" if isinstance(error, str) and error.strip() else ""

# %% solution: my_pass_at_k
from math import comb


def my_pass_at_k(n, c, k):
    """1 − C(n−c, k) / C(n, k): the chance that k of the n samples, drawn without replacement, hold a correct one."""
    return 1 - comb(n - c, k) / comb(n, k)
