"""Watching what GRPO's updates do (chapter 4): fixed completions followed across a run, and each
update's measured effect on the completions it learned from.

:class:`ProbeSet` keeps, for a few questions, the starting policy's most- and least-rewarded
completion and scores those same tokens as the policy learns (``probes.jsonl``);
:func:`probe_summary` turns the rows into rises, noise, a drift z-score and the share of questions
whose probes moved as asked, with its interval. :func:`update_shift`
is the trainer's before/after measurement of one update (log keys ``shift_*``), and
:func:`shift_summary` sums it up over a run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from kimina_edu.grpo import group_advantages
from kimina_edu.logprobs import Rollout, completion_logprobs
from kimina_edu.rewards import score_completion
from kimina_edu.rollouts import chat_prompt, generate
from kimina_edu.train_config import TrainConfig

# ------------------------------------------------------------------ probes: fixed completions, followed

# questions a probe set follows: the share of them whose probes moved as asked then has a 95% Wilson
# interval of at most ±15 points whatever the share (±14.8 at 50% with 40 questions; 30 would give ±17)
PROBE_QUESTIONS = 40
SCORE_CHUNK = 16  # probes scored per forward pass


@dataclass
class ProbeSet:
    """Fixed completions whose log-probs the trainer records as the policy learns.

    One update moves a log-prob by thousandths of a nat; what GRPO does shows over a run: the
    completions it rewarded grow likelier, the ones it penalised less likely. So before training
    we keep, for :data:`PROBE_QUESTIONS` questions, the sampled completion with the highest advantage
    and the one with the lowest, both drawn from the starting policy, and score those *same* token
    sequences again every ``every`` steps (no-grad forwards, :data:`SCORE_CHUNK` probes at a time).
    Forty questions, not three: whether the probes moved as asked is then a share with an interval
    of at most ±15 points (:func:`probe_summary`'s ``probe_asked_*``), not an anecdote.
    The figure this feeds is the "log-prob of the good completion rises" plot of the reference
    article. ``roles[i]``: "high" (advantage > 0), "low" (< 0), or "tie" (a group without signal,
    kept so a run whose first batch has none still has something to follow).
    """

    rollouts: list[Rollout]
    roles: list[str]
    groups: list[int]  # which question (0, 1, …) each probe completion answers
    every: int = 1
    # each probe's tokens from the fork on, [start, end): where its completion first differs from the
    # other probe of its question (None for "tie" probes). A rewarded and a penalised completion share
    # their opening (the same template, often the same restatement); what the policy chose differently
    # starts at the fork, and the shared part's drift pulls both probes alike.
    fork_spans: list[tuple[int, int] | None] | None = None

    @classmethod
    def from_rollouts(cls, rollouts: list[Rollout], group_size: int, *, n_questions: int = PROBE_QUESTIONS,
                      every: int = 1) -> ProbeSet:
        """The highest- and lowest-advantage completion of up to ``n_questions`` groups of
        ``rollouts`` (consecutive runs of ``group_size``, as the trainer lays them out). Groups
        with differing rewards come first; when fewer than ``n_questions`` have any, groups
        without signal fill in (their two probes are "tie"). Empty completions are never probes.
        Each high/low pair's fork is found too (``fork_spans``)."""
        if group_size < 1 or n_questions < 1 or every < 1:
            raise ValueError(f"group_size, n_questions and every must be ≥ 1; got {group_size}, {n_questions}, {every}")
        groups = [[r for r in rollouts[k : k + group_size] if r.completion_ids]
                  for k in range(0, len(rollouts), group_size)]
        groups = [g for g in groups if g]
        if not groups:
            raise ValueError("ProbeSet.from_rollouts needs at least one rollout with a non-empty completion")
        signal = [g for g in groups if max(r.advantage for r in g) > min(r.advantage for r in g)]
        chosen = (signal + [g for g in groups if g not in signal])[:n_questions]
        picks, roles, owners = [], [], []
        for q, g in enumerate(chosen):
            hi, lo = max(g, key=lambda r: r.advantage), min(g, key=lambda r: r.advantage)
            pair = [(hi, "high"), (lo, "low")] if hi.advantage > lo.advantage else [(hi, "tie"), (g[-1], "tie")]
            for r, role in pair[: 1 if pair[0][0] is pair[1][0] else 2]:  # a group of one: one probe
                picks.append(Rollout(list(r.prompt_ids), list(r.completion_ids), [], r.advantage, r.reward,
                                     r.truncated))
                roles.append(role)
                owners.append(q)
        spans: list[tuple[int, int] | None] = [None] * len(picks)
        for i in range(len(picks) - 1):
            if roles[i] == "high" and roles[i + 1] == "low":  # the pair of one question, laid out high then low
                a, b = picks[i].completion_ids, picks[i + 1].completion_ids
                d = fork_index(a, b)
                spans[i], spans[i + 1] = (min(d, len(a) - 1), len(a)), (min(d, len(b) - 1), len(b))
        return cls(picks, roles, owners, every, spans)

    @classmethod
    def sample(cls, model, tok, cfg: TrainConfig, entries: list[dict], *, n_questions: int = PROBE_QUESTIONS,
               every: int = 1, max_batches: int | None = None) -> ProbeSet:
        """A probe set drawn from the starting policy: batches of B consecutive questions of ``entries``
        (batch k from question k·B, seed ``cfg.seed`` + k·B), G samples each, until ``n_questions`` groups
        had differing rewards or ``max_batches`` batches were drawn (default: three times the batches
        ``n_questions`` needs); then :meth:`from_rollouts` over all of them."""
        b, g = cfg.questions_per_batch, cfg.group_size
        max_batches = max_batches or 3 * -(-n_questions // b)
        if len(entries) < b:
            raise ValueError(f"ProbeSet.sample needs at least {b} questions (one batch); got {len(entries)}")
        rollouts, with_signal = [], 0
        for k in range(min(max_batches, len(entries) // b)):
            questions = entries[k * b : (k + 1) * b]
            prompt_ids, comps = generate(model, tok, [chat_prompt(tok, q["question"]) for q in questions],
                                         max_new_tokens=cfg.max_new_tokens, temperature=cfg.temperature, top_p=cfg.top_p,
                                         min_p=cfg.min_p, num_return_sequences=g, seed=cfg.seed + k * b)
            texts = tok.batch_decode(comps, skip_special_tokens=True)
            scores = [score_completion(t, questions[i // g]) for i, t in enumerate(texts)]
            rewards = torch.tensor([x.total for x in scores]).view(len(questions), g)
            adv = group_advantages(rewards, scale=cfg.scale).flatten()
            rollouts += [Rollout(prompt_ids[i // g], c, [], float(a), x.total, tok.eos_token_id not in c)
                         for i, (c, a, x) in enumerate(zip(comps, adv, scores))]
            with_signal += int((rewards.max(1).values > rewards.min(1).values).sum())
            if with_signal >= n_questions:
                break
        return cls.from_rollouts(rollouts, g, n_questions=n_questions, every=every)

    @torch.no_grad()
    def score(self, model, pad_id: int) -> list[list[float]]:
        """Each probe completion's per-token log-probs under ``model`` (evaluation mode, no gradient)."""
        was_training = model.training
        model.eval()
        out: list[list[float]] = []
        try:
            for k in range(0, len(self.rollouts), SCORE_CHUNK):  # the logits of all probes at once: GBs on a real vocabulary
                chunk = self.rollouts[k : k + SCORE_CHUNK]
                logp, _ = completion_logprobs(model, chunk, pad_id)
                out.extend(logp[i, : len(r.completion_ids)].float().cpu().tolist() for i, r in enumerate(chunk))
        finally:
            model.train(was_training)
        return out

    def rows(self, model, pad_id: int, step: int) -> list[dict]:
        """One ``probes.jsonl`` row per probe completion at ``step``: its summed and per-token log-prob."""
        spans = self.fork_spans or [None] * len(self.rollouts)
        return [{"step": step, "probe": i, "group": self.groups[i], "role": self.roles[i],
                 "advantage": self.rollouts[i].advantage, "reward": self.rollouts[i].reward,
                 "logp": sum(lp), "token_logp": lp, "fork_span": list(spans[i]) if spans[i] else None,
                 "fork_logp": sum(lp[spans[i][0] : spans[i][1]]) if spans[i] else None}
                for i, lp in enumerate(self.score(model, pad_id))]


def fork_index(a: list[int], b: list[int]) -> int:
    """The first position where token lists ``a`` and ``b`` differ (the shorter length if one is the
    other's prefix)."""
    n = min(len(a), len(b))
    return next((i for i in range(n) if a[i] != b[i]), n)


def probe_table(rows: list[dict]) -> tuple[list[int], list[list[list[float]]]]:
    """``probes.jsonl`` rows → (the recorded steps, ``token_logp[checkpoint][probe]``), one entry per step."""
    steps = sorted({r["step"] for r in rows})
    n = 1 + max((r["probe"] for r in rows), default=-1)
    table = {s: [[] for _ in range(n)] for s in steps}
    for r in rows:
        table[r["step"]][r["probe"]] = list(r["token_logp"])
    return steps, [table[s] for s in steps]


def probe_summary(rows: list[dict]) -> dict[str, float | int | None]:
    """What the probe shows over a run, from ``probes.jsonl`` rows.

    ``probe_high_rise`` / ``probe_low_rise``: last − first summed log-prob (nats), averaged over the
    high- / low-advantage probes. ``probe_noise``: the std of the high probes' change from one
    recorded step to the next (around its mean drift), averaged — how much the log-prob wanders
    between checkpoints. ``probe_drift_z``: the high probes' mean change per checkpoint divided by
    its standard error (noise / √intervals): a walk with no drift would land within ±2 of 0.
    None where the run recorded too little (one checkpoint, or no probe of that role).
    """
    steps, table = probe_table(rows)
    roles = {r["probe"]: r["role"] for r in rows}
    out: dict[str, float | int | None] = {"probe_checkpoints": len(steps)}
    sums = [[sum(table[c][p]) for c in range(len(steps))] for p in range(len(table[0]) if table else 0)]
    out.update(_drift(sums, roles, "probe"))
    # the same figures from each pair's fork on (rows recorded with fork spans)
    spans = {r["probe"]: r.get("fork_span") for r in rows}
    fork = [[sum(table[c][p][spans[p][0] : spans[p][1]]) for c in range(len(steps))] if spans.get(p) else None
            for p in range(len(sums))]
    out.update(_drift(fork, roles, "probe_fork"))
    out.update(_asked_share([f if f is not None else s for f, s in zip(fork, sums)], roles,
                            {r["probe"]: r.get("group", r["probe"]) for r in rows}))
    return out


def _asked_share(series: list[list[float]], roles: dict[int, str], groups: dict[int, int]) -> dict:
    """Per question, the share of its "high" / "low" probes whose (fork) log-prob ended above / below
    where it started; averaged over questions (the independent draws), with a Wilson 95% interval on
    the number of questions — conservative, as each question's share varies less than a coin's."""
    per_q: dict[int, list[bool]] = {}
    for p, s in enumerate(series):
        if roles.get(p) in ("high", "low") and len(s) >= 2:  # a probe that did not move: not as asked
            per_q.setdefault(groups[p], []).append(s[-1] > s[0] if roles[p] == "high" else s[-1] < s[0])
    if not per_q:
        return {"probe_asked_share": None, "probe_asked_questions": 0, "probe_asked_lo": None, "probe_asked_hi": None}
    share = sum(sum(v) / len(v) for v in per_q.values()) / len(per_q)
    lo, hi = wilson_interval(share, len(per_q))
    return {"probe_asked_share": share, "probe_asked_questions": len(per_q), "probe_asked_lo": lo, "probe_asked_hi": hi}


def wilson_interval(share: float, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson's score interval for a proportion ``share`` of ``n`` draws (95% at z = 1.96): unlike
    share ± z·SE it stays inside [0, 1] and keeps a width at 0% and 100% (Wilson, 1927)."""
    if n < 1:
        raise ValueError(f"wilson_interval needs at least one question (n ≥ 1); got n = {n}")
    centre = (share + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(share * (1 - share) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def _drift(series: list[list[float] | None], roles: dict[int, str], prefix: str) -> dict[str, float | None]:
    """Rise (last − first) of the high and low probes, the high probes' step-to-step noise and drift z."""
    out: dict[str, float | None] = {f"{prefix}_high_rise": None, f"{prefix}_low_rise": None,
                                    f"{prefix}_noise": None, f"{prefix}_drift_z": None}
    if not series or len(next((s for s in series if s), [])) < 2:
        return out
    for role in ("high", "low"):
        rises = [s[-1] - s[0] for p, s in enumerate(series) if s and roles.get(p) == role]
        out[f"{prefix}_{role}_rise"] = sum(rises) / len(rises) if rises else None
    high = [torch.tensor(s).diff() for p, s in enumerate(series) if s and roles.get(p) == "high"]
    if high and len(high[0]) >= 2:
        noise = sum(float(d.std()) for d in high) / len(high)
        out[f"{prefix}_noise"] = noise
        mean_step = sum(float(d.mean()) for d in high) / len(high)
        out[f"{prefix}_drift_z"] = mean_step / (noise / math.sqrt(len(high[0]))) if noise > 0 else None
    return out


# ------------------------------------------------------------------ one update's effect, measured


def update_shift(advantages: list[float], before: list[float], after: list[float]) -> dict[str, float]:
    """What one update did to the completions it learned from: ``shift_pos`` / ``shift_neg``, the mean
    change (after − before) of the per-token log-prob over completions with advantage > 0 / < 0
    (NaN-free: a side without completions is left out), and ``shift_agree``, the share of completions
    with A ≠ 0 whose log-prob moved the way their advantage's sign asked."""
    if not len(advantages) == len(before) == len(after):
        raise ValueError(f"update_shift: {len(advantages)} advantages, {len(before)} before, {len(after)} after")
    pos = [b - a for adv, a, b in zip(advantages, before, after) if adv > 0]
    neg = [b - a for adv, a, b in zip(advantages, before, after) if adv < 0]
    out: dict[str, float] = {}
    if pos:
        out["shift_pos"] = sum(pos) / len(pos)
    if neg:
        out["shift_neg"] = sum(neg) / len(neg)
    if pos or neg:
        out["shift_agree"] = (sum(d > 0 for d in pos) + sum(d < 0 for d in neg)) / (len(pos) + len(neg))
    return out


def shift_summary(log: list[dict]) -> dict[str, float | int | None]:
    """Every measured update of a run (log rows with both ``shift_pos`` and ``shift_neg``):
    ``shift_updates`` (how many), ``shift_gap_frac`` (the share in which the rewarded completions
    rose above the penalised ones, shift_pos > shift_neg), the means of shift_pos / shift_neg and of
    shift_agree. None where fewer than two updates were measured."""
    rows = [r for r in log if "shift_pos" in r and "shift_neg" in r]
    out: dict[str, float | int | None] = {"shift_updates": len(rows)}
    if len(rows) < 2:
        return {**out, "shift_gap_frac": None, "shift_pos_mean": None, "shift_neg_mean": None, "shift_agree_mean": None}
    n = len(rows)
    return {**out, "shift_gap_frac": sum(r["shift_pos"] > r["shift_neg"] for r in rows) / n,
            "shift_pos_mean": sum(r["shift_pos"] for r in rows) / n,
            "shift_neg_mean": sum(r["shift_neg"] for r in rows) / n,
            "shift_agree_mean": sum(r["shift_agree"] for r in rows) / n}
