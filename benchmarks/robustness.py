"""`make robustness`: chapters 3 → 4 → 5 for SEED 0–4 (and seed 0 once more on every core), so the
course's learning figures are stated as ranges, and every learning goal is checked in every run.

Each run is what the notebooks do, through the same presets (``SFTRecipe.preset``,
``TrainConfig.preset``) and the shipped pocket model: the LoRA SFT warm-up with the run's seed →
held-out accuracy (400 questions, greedy, chapter 3's 96 tokens) → GRPO from scratch with the
run's seed → held-out accuracy, the gain paired over the same questions with its 95% interval, and the same
on a fresh draw of 400 questions no chapter touches (``tasks.fresh_draw``) → chapter 5's TRL run (``GRPOTrainer``, the first
``trl_bridge.compare_steps`` of chapter 4's steps) → held-out accuracy, compared with ours at that step on
chapter 4's in-run questions (the whole runs on all 400 when it is all of them). The only difference
from notebook 04: no held-out evaluation *during* training but that one (greedy evaluation changes
nothing the run learns, and costs time; its seconds are not counted in GRPO's). Each run's trained policy
is kept in runs/robustness[-MODEL]/seedS-tT/: the warm-up's adapter (``sft_adapter``) and GRPO's (``policy``),
with ``policy.json`` saying how to rebuild it (``models.save_policy``).

Each run is its own process (a thread count is fixed per process); two run side by side, one
thread each, which is also how a 2-core machine finishes them fastest. Seed 0 then runs once more
alone on every core — as a notebook does — with a private cache, so its SFT adapter is trained
with that thread count too: floating-point sums differ with the thread count, and the goals must
hold either way.

    python -m benchmarks.robustness                       # writes runs/robustness.json and prints the table
    python -m benchmarks.robustness --seeds 0 1 --until grpo  # quicker looks (sft: chapter 3 only)
    python -m benchmarks.robustness --table               # the table of the last run, no training
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "runs" / "robustness.json"
SFT_EVAL_TOKENS = 96  # notebook 03's MAX_NEW_TOKENS
N_EVAL = 400  # held-out questions, and as many of the fresh draw: a gain of 8 points is then ~4 standard errors


def claim_read_reward(text: str, entry: dict):
    """Chapter 1's reward, except that a right answer counts only when the completion restates the question's
    claim right (``tasks.restates_claim``): an answer reached from a misread claim earns the format part alone.
    A trial (``--set grpo.reward=read_claim``), not a chapter's reward."""
    from kimina_edu.rewards import W_CORRECT, W_FORMAT, RewardBreakdown, score_completion
    from kimina_edu.tasks import restates_claim

    s = score_completion(text, entry)
    correct = s.correct if restates_claim(text, entry) else 0.0
    return RewardBreakdown(s.answer, s.format, correct, W_CORRECT * correct + W_FORMAT * s.format)


def run_one(seed: int, *, until: str = "trl", sft: dict | None = None, grpo: dict | None = None,
            model_id: str = "pocket", run_dir: str | os.PathLike | None = None) -> dict:
    """One seed's chapters 3 → 4 → 5 in this process; returns the figures the goals judge. The trained policy
    is kept under ``run_dir`` (default: beside the results file, runs/robustness[-MODEL]/).
    ``grpo["reward"]`` (``"read_claim"``: :func:`claim_read_reward`) replaces chapter 4's reward."""
    import torch
    from trl import GRPOTrainer as TRLGRPOTrainer

    from kimina_edu.eval import evaluate_policy, in_run_questions, scored
    from kimina_edu.lora import lora_config
    from kimina_edu.models import load_policy, save_policy
    from kimina_edu.probes import ProbeSet, probe_summary, shift_summary
    from kimina_edu.record import paired_gain
    from kimina_edu.rewards import score_completion
    from kimina_edu.runtime import use_progress_bar
    from kimina_edu.sft import SFTRecipe, ensure_sft_adapter, sft_stop_record
    from kimina_edu.tasks import (
        SEEDS,
        claim_balanced,
        claim_read_rate,
        fresh_draw,
        held_out,
        make_entries,
        premises_only_accuracy,
        verdict_balance,
    )
    from kimina_edu.train_config import TrainConfig
    from kimina_edu.trainer import GRPOTrainer, read_log, reward_at_ends
    from kimina_edu.trl_bridge import (
        REWARD_FUNCS,
        build_dataset,
        compare_steps,
        grpo_config,
        stop_when_silent,
    )

    grpo = dict(grpo or {})
    reward_fn = {"answer": score_completion, "read_claim": claim_read_reward}[grpo.pop("reward", "answer")]
    if reward_fn is not score_completion and until == "trl":
        raise ValueError("grpo.reward changes chapter 4's reward only; chapter 5's TRL run would score another: --until grpo")
    row: dict = {"seed": seed, "threads": torch.get_num_threads(), "model": model_id}
    recipe = SFTRecipe.preset(model_id, seed=seed, **(sft or {}))
    cfg = TrainConfig.preset(model_id, seed=seed, eval_every=0, **grpo)
    eval_entries, fresh_entries = held_out(cfg.task, N_EVAL), fresh_draw(cfg.task, N_EVAL)
    on_balanced = {id(b) for b in claim_balanced(eval_entries)}
    balanced = [i for i, e in enumerate(eval_entries) if id(e) in on_balanced]
    train_entries = make_entries(cfg.task, 5000, SEEDS["rl"])
    row["premises_only"] = premises_only_accuracy(eval_entries, train_entries)  # the shortcut's ceiling

    t0 = time.perf_counter()
    base, adapter = ensure_sft_adapter(model_id, recipe=recipe)
    row["sft_seconds"] = time.perf_counter() - t0
    checks = sft_stop_record(adapter).get("dev_checks", [])
    row["sft_epochs"] = checks[-1]["epoch"] if checks else recipe.epochs
    row["sft_dev_checks"] = checks  # the dev accuracy at each check that SFT ran (empty without a dev target)
    model, tok = load_policy(base, adapter=adapter, verbose=False)
    r = evaluate_policy(model, tok, eval_entries, max_new_tokens=SFT_EVAL_TOKENS, progress=False, keep_completions=True)
    row.update(n_eval=len(eval_entries), sft_accuracy=r["accuracy"], sft_format_rate=r["format_rate"],
               claim_read_sft=claim_read_rate(r["completions"], eval_entries),
               verdicts_sft=verdict_balance(r["completions"], eval_entries))
    if until == "sft":
        return row

    def greedy(entries: list[dict]) -> tuple[dict, list[float]]:
        result = evaluate_policy(model, tok, entries, max_new_tokens=cfg.max_new_tokens, progress=False,
                                 keep_completions=True)
        return result, scored(result["completions"], entries)

    keep = Path(run_dir or _results(model_id).with_suffix("")) / f"seed{seed}-t{row['threads']}"
    shutil.rmtree(keep, ignore_errors=True)
    shutil.copytree(adapter, keep / "sft_adapter")
    with tempfile.TemporaryDirectory() as tmp:
        model, tok = load_policy(base, adapter=adapter, lora=lora_config(), seed=seed, verbose=False)
        if cfg.max_new_tokens == SFT_EVAL_TOKENS:  # the same greedy evaluation as chapter 3's (a zero LoRA on top)
            right_before = scored(r["completions"], eval_entries)
        else:
            right_before = greedy(eval_entries)[1]
        row["grpo_before"] = sum(right_before) / len(right_before)
        fresh_right_before = greedy(fresh_entries)[1]
        # chapter 4's probes, 40 questions with signal (ProbeSet.sample, as the notebook draws them) — but from the
        # first training questions, where the notebook starts at the 2,000th, and scored every eval_every // 5 steps,
        # where it scores every // 2: kept as the recorded seeds ran, so their rows stay comparable
        notebook_eval_every = TrainConfig.preset(model_id, seed=seed, **grpo).eval_every
        probes = ProbeSet.sample(model, tok, cfg, train_entries, every=max(1, notebook_eval_every // 5))
        trainer = GRPOTrainer(model, tok, cfg, train_entries=train_entries, output_dir=keep / "grpo", progress=False,
                              probes=probes, reward_fn=reward_fn)
        # chapter 5 compares TRL with chapter 4 at step `n_compare` on the questions chapter 4 checks during its run;
        # greedy evaluation draws no random numbers, so evaluating here leaves the run as it was
        n_compare, compare_entries = compare_steps(model_id, cfg), in_run_questions(eval_entries)
        at_compare: dict = {"seconds": 0.0}

        def check_at_compare(step_row: dict) -> None:
            if step_row["step"] == n_compare < cfg.steps:  # a whole run is compared on its final evaluation
                t = time.perf_counter()
                at_compare["acc"] = evaluate_policy(model, tok, compare_entries, max_new_tokens=cfg.max_new_tokens,
                                                    progress=False)["accuracy"]
                at_compare["seconds"] = time.perf_counter() - t

        t0 = time.perf_counter()
        log = trainer.train(on_step=check_at_compare)
        row["grpo_seconds"] = time.perf_counter() - t0 - at_compare["seconds"]
        row.update(probe_summary(read_log(trainer.probe_path)))
        row.update(shift_summary(log))
        row["guard_stopped"] = getattr(trainer, "guard_stopped", None)
        # with grpo.dev_every: each greedy dev check (its seconds are in grpo_seconds), and the step whose weights
        # the run ended with when it was not the last
        row["dev_checks"], row["dev_kept"] = trainer.dev_checks, trainer.dev_kept
        policy = save_policy(model, keep / "policy", base=base, merged=[keep / "sft_adapter"])
        (keep / "policy.json").write_text(json.dumps(policy, indent=1))
        after, right_after = greedy(eval_entries)
        fresh_right_after = greedy(fresh_entries)[1]
        row.update(grpo_gain_paired=list(paired_gain(right_before, right_after)),
                   balanced_gain_paired=list(paired_gain([right_before[i] for i in balanced],  # ignoring the claim: 50%
                                                         [right_after[i] for i in balanced])),
                   fresh_before=sum(fresh_right_before) / N_EVAL, fresh_after=sum(fresh_right_after) / N_EVAL,
                   fresh_gain_paired=list(paired_gain(fresh_right_before, fresh_right_after)))
        row["claim_read_after"] = claim_read_rate(after["completions"], eval_entries)
        row["verdicts_after"] = verdict_balance(after["completions"], eval_entries)  # the lean moved, or reading?
        row["reward_first"], row["reward_last"] = reward_at_ends(log)
        row.update(grpo_after=after["accuracy"], grpo_format_rate=after["format_rate"], grpo_steps=len(log),
                   grpo_skipped=sum(1 for x in log if x.get("skipped")))
        row["reward_rise"] = row["reward_last"] - row["reward_first"]
        row["grpo_gain"] = row["grpo_after"] - row["grpo_before"]
        if until == "trl":
            model, tok = load_policy(base, adapter=adapter, lora=lora_config(), seed=seed, verbose=False)
            trl_cfg = TrainConfig(**{**cfg.__dict__, "steps": n_compare})
            args = grpo_config(trl_cfg, f"{tmp}/trl", use_cpu=True)
            t = TRLGRPOTrainer(model=model, reward_funcs=REWARD_FUNCS, args=args, processing_class=tok,
                               train_dataset=build_dataset(train_entries),
                               callbacks=[stop_when_silent(cfg.silent_window)])
            t0 = time.perf_counter()
            use_progress_bar(t, "TRL").train()
            row["trl_seconds"] = time.perf_counter() - t0
            row["trl_steps"] = t.state.global_step
            whole_run = n_compare == cfg.steps
            row["compare_step"], row["compare_n_eval"] = n_compare, len(eval_entries if whole_run else compare_entries)
            row["trl_after"] = evaluate_policy(model, tok, eval_entries if whole_run else compare_entries,
                                               max_new_tokens=cfg.max_new_tokens, progress=False)["accuracy"]
            # ours at the same step: its final accuracy, or the one measured at n_compare (None: it stopped before)
            row["ours_at_compare"] = row["grpo_after"] if whole_run else at_compare.get("acc")
            if row["ours_at_compare"] is not None:
                row["trl_minus_ours"] = row["trl_after"] - row["ours_at_compare"]
    return row


# What every run must show (the course's LEARNING_GOALS, plus chapter 5's comparison over seeds).
def goals_missed(row: dict) -> list[str]:
    """The goals ``row`` misses; chapter 4's are judged again on the fresh draw where the row has one (a missing
    figure a goal needs is a miss, as in ``goals.missed_goals``)."""
    from kimina_edu.course import GOALS

    metrics = {"03": {"sft_accuracy": row["sft_accuracy"], "sft_format_rate": row["sft_format_rate"]}}
    if "grpo_after" in row:
        metrics["04"] = {"accuracy_before": row["grpo_before"], "accuracy_after": row["grpo_after"],
                         "gain_paired_points": row.get("grpo_gain_paired"),
                         "grpo_seconds": row["grpo_seconds"], "format_after": row["grpo_format_rate"],
                         "shift_pos_mean": row.get("shift_pos_mean"), "shift_neg_mean": row.get("shift_neg_mean")}
        if "fresh_after" in row:
            metrics["04 (fresh draw)"] = {**metrics["04"], "accuracy_before": row["fresh_before"],
                                          "accuracy_after": row["fresh_after"],
                                          "gain_paired_points": row["fresh_gain_paired"]}
    def judged(met, m: dict) -> bool:
        try:
            return bool(met(m))
        except (KeyError, TypeError):
            return False

    def reads_accuracy(met) -> bool:  # a goal on the fresh draw's figures, not one it would only repeat
        try:
            met({k: v for k, v in metrics["04"].items() if k not in FRESH_FIGURES})
        except (KeyError, TypeError):
            return True
        return False

    return [text + part[2:] for part, m in metrics.items()
            for text, met in GOALS[row.get("model", "pocket")].get(part[:2], [])
            if (part[2:] == "" or reads_accuracy(met)) and not judged(met, m)]


FRESH_FIGURES = ("accuracy_before", "accuracy_after", "gain_paired_points")  # chapter 4's, measured again there


PCT, PTS, NUM = "{:.1%}".format, lambda v: f"{100 * v:+.1f}", "{:.0f}".format  # points: differences of rates
FIGURES = [("sft_epochs", "03 SFT epochs run", "{:g}".format), ("sft_accuracy", "03 SFT accuracy", PCT),
           ("sft_format_rate", "03 SFT format rate", PCT), ("claim_read_sft", "03 claim restated right", PCT),
           ("reward_rise", "04 sampled reward, last − first quarter of steps", "{:+.2f}".format),
           ("grpo_after", "04 accuracy after GRPO", PCT), ("claim_read_after", "04 claim restated right after", PCT),
           ("grpo_gain", "04 GRPO gain (points)", PTS),
           ("grpo_gain_paired", "04 GRPO gain, paired 95% interval (points)", None),
           ("balanced_gain_paired", "04 the same on the claim-balanced questions (points)", None),
           ("fresh_before", "04 fresh draw: accuracy before GRPO", PCT), ("fresh_after", "04 fresh draw: after", PCT),
           ("fresh_gain_paired", "04 fresh draw: gain, paired 95% interval (points)", None),
           ("grpo_steps", "04 steps run", NUM),
           ("grpo_skipped", "04 steps skipped (no signal)", NUM), ("grpo_seconds", "04 GRPO seconds", NUM),
           ("probe_fork_high_rise", "04 probe, from the fork on: rise of the rewarded completions (nats)", "{:+.2f}".format),
           ("probe_fork_low_rise", "04 probe, from the fork on: rise of the penalised completions (nats)", "{:+.2f}".format),
           ("probe_fork_noise", "04 probe, from the fork on: noise between checkpoints (nats)", "{:.2f}".format),
           ("probe_high_rise", "04 probe: whole-completion rise, rewarded (nats)", "{:+.2f}".format),
           ("probe_low_rise", "04 probe: whole-completion rise, penalised (nats)", "{:+.2f}".format),
           ("shift_gap_frac", "04 measured updates with rewarded above penalised", PCT),
           ("shift_pos_mean", "04 per update: Δ log-prob per token, rewarded (nats)", "{:+.4f}".format),
           ("shift_neg_mean", "04 per update: Δ log-prob per token, penalised (nats)", "{:+.4f}".format),
           ("ours_at_compare", "05 ours at the compared step (chapter 4's run)", PCT),
           ("trl_after", "05 TRL at the compared step", PCT), ("trl_minus_ours", "05 TRL − ours at the same step (points)", PTS),
           ("trl_steps", "05 TRL steps run", NUM), ("trl_seconds", "05 TRL seconds", NUM)]


def table(rows: list[dict], failed: list[str] = ()) -> str:
    """The figures of ``rows`` as min / median / max, then the goals each run missed. ``failed``: the runs
    that ended without a row ("seed 2 (1 thr.)"); they are named, and no goal is called met for them."""
    from kimina_edu.record import gain_text

    lines = ["| figure | min | median | max | runs |", "|---|---|---|---|---|"]
    for key, label, fmt in FIGURES:
        vals = [r[key] for r in rows if r.get(key) is not None]
        if vals and fmt is None:  # a gain with its interval per run: the smallest and largest gain with theirs
            vals.sort()
            lines.append(f"| {label} | {gain_text(*vals[0])} | {statistics.median(v[0] for v in vals):+.1f} | "
                         f"{gain_text(*vals[-1])} | {len(vals)} |")
        elif vals:
            lo, mid, hi = min(vals), statistics.median(vals), max(vals)
            lines.append(f"| {label} | {fmt(lo)} | {fmt(mid)} | {fmt(hi)} | {len(vals)} |")
    notes = []
    # one median per compared step: rows from before chapter 5 compared at a step of its own (TRL_STEPS)
    # compared the whole runs (grpo_after); medians of different steps are not mixed
    by_step: dict = {}
    for r in rows:
        if "trl_after" in r and r.get("ours_at_compare", r["grpo_after"]) is not None:
            by_step.setdefault(r.get("compare_step", "the whole runs"), []).append(r)
    for step, two in by_step.items():
        diff = (statistics.median(r["trl_after"] for r in two)
                - statistics.median(r.get("ours_at_compare", r["grpo_after"]) for r in two))
        at = f"at step {step}" if isinstance(step, int) else step
        notes.append(f"median TRL − median ours, {at} ({len(two)} runs): {PTS(diff)} points (goal: within ±5 points)")
    shortcut = {r["premises_only"] for r in rows if "premises_only" in r}
    if shortcut:
        notes.append(f"reading only the premises scores at most {'/'.join(PCT(v) for v in sorted(shortcut))} "
                     "on these held-out questions")
    lines.append("\n" + "; ".join(notes) + "." if notes else "")
    missed: dict[str, list[str]] = {}  # goal → the runs that missed it, one line per goal
    for r in rows:
        for goal in goals_missed(r):
            missed.setdefault(goal, []).append(f"seed {r['seed']} ({r['threads']} thr.)")
    lines.extend(f"missed: {goal} — {', '.join(runs)}" for goal, runs in missed.items())
    if failed:
        lines.append(f"failed: {', '.join(failed)} — no row, so no goal judged (each run's log says why)")
    elif not missed:
        lines.append("every goal met in every run")
    return "\n".join(lines)


def _share_model(cache: Path, source: Path) -> None:
    """Let the runs' own cache (``--cache``, or a new temporary one) reach the learner's converted SmolLM2
    (``source``, a ``make smollm2`` folder): a link, unless the cache already holds its own copy."""
    cache.mkdir(parents=True, exist_ok=True)
    link = cache / source.name
    if not link.exists() and not link.is_symlink():
        link.symlink_to(source.resolve(), target_is_directory=True)


def _child(seed: int, threads: int, cache: str | None, until: str, out: Path, sets: dict, model: str,
           run_dir: Path) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads),
           "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1"}
    if cache:
        env["KIMINA_EDU_CACHE"] = cache
    code = (f"import json, torch; torch.set_num_threads({threads}); from benchmarks.robustness import run_one; "
            f"open({str(out)!r}, 'w').write(json.dumps(run_one({seed}, until={until!r}, sft={sets['sft']!r}, "
            f"grpo={sets['grpo']!r}, model_id={model!r}, run_dir={str(run_dir)!r})))")
    return subprocess.Popen([sys.executable, "-c", code], cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                            stderr=open(out.with_suffix(".log"), "w"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="*", default=[0, 1, 2, 3, 4])
    parser.add_argument("--no-other-threads", action="store_true",
                        help="skip the extra run of the first seed on every core (its own cache)")
    parser.add_argument("--until", choices=["sft", "grpo", "trl"], default="trl",
                        help="stop after chapter 3 (sft), 4 (grpo) or 5 (trl, the default)")
    parser.add_argument("--set", nargs="*", default=[], metavar="sft.KEY=VALUE",
                        help="try another recipe, e.g. sft.epochs=10 grpo.lr=1e-4 (values parsed as Python literals)")
    parser.add_argument("--cache", help="cache folder for the SFT adapters (default: a new temporary one)")
    parser.add_argument("--parallel", type=int, default=2, help="runs side by side (one thread each)")
    parser.add_argument("--threads", type=int, help="threads per run (default: the cores shared among --parallel runs; "
                        "1 with --parallel 1 leaves a core to other work)")
    parser.add_argument("--model", default="pocket", choices=["pocket", "smollm2"],
                        help="the model (smollm2: the real SmolLM2; hours on 2 cores — use --resume)")
    parser.add_argument("--resume", action="store_true",
                        help="keep the rows --out already holds for this model and recipe; run only the missing seeds")
    parser.add_argument("--out", help="results file (default runs/robustness.json; runs/robustness-smollm2.json)")
    parser.add_argument("--table", action="store_true", help="print the table of --out and exit")
    args = parser.parse_args(argv)
    out = Path(args.out) if args.out else _results(args.model)
    sets: dict = {"sft": {}, "grpo": {}}
    for item in args.set:
        key, _, value = item.partition("=")
        part, _, field = key.partition(".")
        if part not in sets or not field or not value:
            parser.error(f"--set {item!r}: expected sft.KEY=VALUE or grpo.KEY=VALUE")
        import ast

        try:
            sets[part][field] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            sets[part][field] = value
    if args.table:
        print(table(json.loads(out.read_text())["runs"]))
        return 0
    cores = os.cpu_count() or 2
    threads = args.threads or max(1, cores // args.parallel)
    # not the learner's cache: adapters trained here stay here (--cache reuses another run's)
    shared = args.cache or tempfile.mkdtemp(prefix="kimina-robustness-")
    rows = _kept_rows(out, args.model, sets, args.until) if args.resume else []
    done = {(r["seed"], r["threads"]) for r in rows}
    jobs = [(s, threads, shared) for s in args.seeds if (s, threads) not in done]
    if not args.no_other_threads and threads != cores and (args.seeds[0], cores) not in done:
        jobs.append((args.seeds[0], cores, tempfile.mkdtemp(prefix="kimina-robustness-")))  # another summation order
    if args.model == "smollm2":  # the runs' caches hold their adapters; the model is the learner's `make smollm2`
        from kimina_edu.errors import ModelUnavailableError
        from kimina_edu.smollm2 import smollm2_path, smollm2_root

        try:
            smollm2_path()
        except ModelUnavailableError as exc:
            print(f"robustness: {exc}", flush=True)
            return 1
        for cache in {c for _, _, c in jobs}:
            _share_model(Path(cache), smollm2_root())
    if rows:
        print(f"resuming {out}: {len(rows)} row(s) kept ({', '.join(f'seed {s}' for s, _ in sorted(done))})", flush=True)
    work = Path(tempfile.mkdtemp(prefix="robustness-"))
    running, failed, start = [], [], time.perf_counter()
    print(f"{len(jobs)} runs, {args.parallel} at a time, {threads} thread(s) each (the last alone on {cores}); "
          f"logs in {work}", flush=True)
    while jobs or running:
        while jobs and len(running) < args.parallel and (jobs[0][1] == threads or not running):
            seed, n, cache = jobs.pop(0)
            path = work / f"seed{seed}-t{n}.json"
            running.append((seed, n, path, _child(seed, n, cache, args.until, path, sets, args.model,
                                                   out.with_suffix(""))))
            if n != threads:
                break  # a run on every core runs alone
        time.sleep(2)
        for item in list(running):
            seed, n, path, proc = item
            if proc.poll() is None:
                continue
            running.remove(item)
            if proc.returncode != 0 or not path.exists():
                print(f"seed {seed} ({n} threads) FAILED — see {path.with_suffix('.log')}", flush=True)
                failed.append(f"seed {seed} ({n} thr.)")
                continue
            row = json.loads(path.read_text())
            rows.append(row)
            _write(out, rows, sets, args.until, time.perf_counter() - start)  # each row kept as it lands
            print(f"seed {seed} ({row['threads']} threads) done at {time.perf_counter() - start:.0f}s: "
                  f"SFT {row['sft_accuracy']:.1%}"
                  + (f", GRPO {row['grpo_before']:.1%} → {row['grpo_after']:.1%} in {row['grpo_steps']} steps"
                     if "grpo_after" in row else "")
                  + (f", TRL {row['trl_after']:.1%}" if "trl_after" in row else ""),
                  flush=True)
    _write(out, rows, sets, args.until, time.perf_counter() - start)
    print("\n" + table(sorted(rows, key=lambda r: (r["seed"], -r["threads"])), failed))
    missed = [m for r in rows for m in goals_missed(r)]
    return 1 if missed or failed or len({r["seed"] for r in rows}) < len(set(args.seeds)) else 0


def _results(model: str) -> Path:
    """The results file of ``model``'s runs (their policies in the folder of the same name)."""
    return OUT if model == "pocket" else OUT.with_name(f"robustness-{model}.json")


def _write(out: Path, rows: list[dict], sets: dict, until: str, seconds: float) -> None:
    """The results file, rewritten whole (a temp file renamed over it) after every finished run."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps({"runs": sorted(rows, key=lambda r: (r["seed"], -r["threads"])), "recipe_changes": sets,
                               "until": until, "seconds": seconds, "date": time.strftime("%Y-%m-%d")}, indent=1))
    os.replace(tmp, out)


def _kept_rows(out: Path, model: str, sets: dict, until: str) -> list[dict]:
    """The rows of a previous run that ``--resume`` keeps: same model, same recipe changes, at least as far."""
    try:
        old = json.loads(out.read_text())
    except (OSError, ValueError):
        return []
    if old.get("recipe_changes") != sets:
        print(f"{out} was made with other recipe changes ({old.get('recipe_changes')}): starting afresh", flush=True)
        return []
    order = ["sft", "grpo", "trl"]
    far_enough = order.index(old.get("until", "trl")) >= order.index(until)
    return [r for r in old.get("runs", []) if r.get("model", "pocket") == model and far_enough]


if __name__ == "__main__":
    raise SystemExit(main())
