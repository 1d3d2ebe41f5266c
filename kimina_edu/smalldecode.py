"""Chapter 4 — decoding a Llama in plain torch: the pocket model's sampler, and SmolLM2's on a CPU.

The pocket model (~1 M parameters, 4 layers) does almost no arithmetic per token: a decoding step
of 48 rows multiplies a few hundred thousand weights. In ``model.generate`` a step cost about 15 ms
(cProfile of one chapter-4 round, 8 prompts × 6, AMD box, 2026-12-04; benchmarks/README.md, "The
pocket model"): the framework around the network, a ``torch.multinomial`` that spends a random number on every vocabulary entry, top-p's full sort, and
every prompt prefilled once per sample. Here the same network runs as a short loop over
preallocated tensors — one fused q/k/v matmul and one fused gate/up matmul per layer, a cos/sin
table looked up by position, a key/value cache written in place, each prompt prefilled once — and
:func:`draw_next` samples with one uniform number per row (``benchmarks/bench_rollouts.py``: about
3× ``generate``'s tokens/s on the same batched call).

The real SmolLM2 (135 M parameters) runs through the same loop on a CPU, with two options that pay
only where a step is arithmetic: the system turn every prompt starts with is run once
(``share_prefix``), and finished rows leave the batch (``drop_finished``). Its top-p draw ranks only
the nucleus (:func:`_top_p_run`) — ranking its 49,152-token vocabulary for 48 rows had cost ~96 ms a
step. Measured against transformers' forward with its cache (``python benchmarks/bench_smollm2.py``,
AMD box, 2026-12-05; benchmarks/README.md, "SmolLM2"): 1.35–1.55× the tokens/s, greedy and sampling
alike (the same tokens when greedy).

Greedy, it writes ``generate``'s tokens; sampling, it draws from ``generate``'s distribution
(temperature → top-p → min-p) but not the same draws (tests/test_smalldecode.py). The course's
figures are measured over seeds with this decoder.

Only what the pocket model and SmolLM's family use is supported — Llama, SiLU MLP, no biases,
default RoPE, float32 on the CPU; :func:`supported` says why another model is not, and the
caller then uses ``model.generate`` (a small model) or
:func:`kimina_edu.rollouts.decode_dropping_finished` (a large one: on a GPU, in bf16).
"""

from __future__ import annotations

from typing import Any

from kimina_edu.merged_weights import effective_weights


def supported(model) -> str | None:
    """``None`` when :class:`SmallLlama` can decode ``model`` (a ``LlamaForCausalLM``, possibly
    inside a PEFT wrapper), else the reason it cannot, in one line."""
    import torch

    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    cfg = getattr(inner, "config", None)
    if cfg is None or getattr(cfg, "model_type", None) != "llama":
        return f"not a Llama model ({getattr(cfg, 'model_type', type(inner).__name__)})"
    rope = getattr(cfg, "rope_parameters", None) or {}
    checks = [
        (cfg.hidden_act == "silu", f"activation {cfg.hidden_act}"),
        (not getattr(cfg, "attention_bias", False) and not getattr(cfg, "mlp_bias", False), "biases in attention or MLP"),
        (rope.get("rope_type", "default") == "default" and "rope_theta" in rope,
         f"RoPE {rope or 'parameters this transformers does not name'}"),
        (getattr(cfg, "pretraining_tp", 1) == 1, "pretraining_tp > 1"),
        (inner.device.type == "cpu", f"device {inner.device}"),
        (inner.dtype == torch.float32, f"dtype {inner.dtype}"),
    ]
    problems = [why for ok, why in checks if not ok]
    return "; ".join(problems) or None


class SmallLlama:
    """A snapshot of a Llama's (merged) weights, decoded without ``transformers`` in the loop.

    ``weights``: ``(name, tensor)`` pairs under the base checkpoint's names — a plain model's
    ``named_parameters()``, or what a PEFT policy computes with
    (:func:`kimina_edu.merged_weights.effective_weights`: the merged sums, or the base inside
    ``model.disable_adapter()``).
    """

    def __init__(self, config, weights, dtype=None) -> None:
        import torch

        # the matrices' dtype (``precision.matmul_dtype``): bf16 multiplies them on the CPU's bf16 units; the
        # residual stream, norms, attention and the cache stay fp32, and every product comes back as fp32
        self.dtype = dtype or torch.float32
        w: dict[str, Any] = {name.removeprefix("model."): t.detach() for name, t in weights}
        self.heads, self.kv_heads = config.num_attention_heads, config.num_key_value_heads
        self.head_dim = getattr(config, "head_dim", None) or config.hidden_size // self.heads
        self.eps, self.theta = config.rms_norm_eps, config.rope_parameters["rope_theta"]
        self.embed = w["embed_tokens.weight"]
        self.head_rows = w.get("lm_head.weight", self.embed)  # [vocab, hidden], fp32: the refined logits' rows
        self.head = self.head_rows.t().to(self.dtype)  # [hidden, vocab]; fp32: a view
        self.norm = w["norm.weight"]
        # the rows each forward of the last decode sent through the layers' matmuls and the LM head:
        # (rows × positions, rows whose logits were taken); benchmarks/bench_smollm2.py times the same
        # matmuls at these sizes, the physical limit "at that batch"
        self.matmul_rows: list[tuple[int, int]] = []
        self.layers = []
        for i in range(config.num_hidden_layers):
            p = f"layers.{i}."
            self.layers.append(dict(
                ln1=w[p + "input_layernorm.weight"], ln2=w[p + "post_attention_layernorm.weight"],
                qkv=torch.cat([w[p + f"self_attn.{x}_proj.weight"] for x in "qkv"]).t().contiguous().to(self.dtype),
                o=w[p + "self_attn.o_proj.weight"].t().contiguous().to(self.dtype),
                gate_up=torch.cat([w[p + "mlp.gate_proj.weight"], w[p + "mlp.up_proj.weight"]]).t().contiguous()
                .to(self.dtype),
                down=w[p + "mlp.down_proj.weight"].t().contiguous().to(self.dtype)))
        # each sampled token's log-probability under softmax(logits / logp_temperature), per output row, when
        # decode was asked for them: what the learner compares its own with (the sampler–learner mismatch)
        self.sampled_logp: list[list[float]] | None = None

    @classmethod
    def from_model(cls, model, dtype=None) -> SmallLlama:
        inner = model.get_base_model() if hasattr(model, "get_base_model") else model
        return cls(inner.config, effective_weights(model), dtype)

    def _mm(self, x, weight):
        """``x @ weight`` in the weight's dtype, the product back in fp32."""
        return x @ weight if weight.dtype == x.dtype else (x.to(weight.dtype) @ weight).float()

    def _rms(self, x, weight):
        return weight * (x * (x.pow(2).mean(-1, keepdim=True) + self.eps).rsqrt())

    def _rope(self, x, cos, sin):
        import torch

        half = x.shape[-1] // 2
        return x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin

    def _layers(self, x, cos, sin, cache, start: int, attend, logits: bool = True):
        """``x``: [rows, S, hidden] at cache columns ``start … start+S-1`` (rows: the cache's, or 1 to write
        the same keys into every row); ``attend(q, layer's k, v)`` does the attention over the cache so
        far. Returns the last position's logits (None when ``logits`` is False)."""
        import torch.nn.functional as F

        rows, s, _ = x.shape
        h, kv, d = self.heads, self.kv_heads, self.head_dim
        end = start + s
        self.matmul_rows.append((rows * s, rows if logits else 0))
        for layer, (k_cache, v_cache) in zip(self.layers, cache):
            qkv = self._mm(self._rms(x, layer["ln1"]), layer["qkv"])
            q = qkv[..., : h * d].view(rows, s, h, d).transpose(1, 2)
            k = qkv[..., h * d: (h + kv) * d].view(rows, s, kv, d).transpose(1, 2)
            k_cache[:, :, start:end] = self._rope(k, cos, sin)
            v_cache[:, :, start:end] = qkv[..., (h + kv) * d:].view(rows, s, kv, d).transpose(1, 2)
            att = attend(self._rope(q, cos, sin), k_cache[:, :, :end], v_cache[:, :, :end])
            x = x + self._mm(att.reshape(rows, s, h * d), layer["o"])
            gate, up = self._mm(self._rms(x, layer["ln2"]), layer["gate_up"]).chunk(2, dim=-1)
            x = x + self._mm(F.silu(gate) * up, layer["down"])
        return self._logits(self._rms(x[:, -1], self.norm)) if logits else None

    def _logits(self, h):
        """The LM head. In bf16 a logit between 8 and 16 is rounded to a step of 1/16, so near-tied tokens
        become exactly tied and argmax picks the lower token id — a bias, not noise (bf16 greedy answers
        scored 3.25 points below fp32's on the same 400 held-out questions, 95% interval −5.4 to −1.1:
        benchmarks/LOG.md, 2026-12-06). The rows' :data:`REFINE_K` largest logits, where all the probability
        is, are therefore taken again in fp32 from the fp32 hidden state; the rest stay bf16's."""
        import torch

        logits = self._mm(h, self.head)
        if self.dtype == torch.float32:
            return logits
        top = logits.topk(min(REFINE_K, logits.shape[-1]), dim=-1).indices
        return logits.scatter_(1, top, torch.einsum("rd,rkd->rk", h, self.head_rows[top]))

    def decode(self, ids, attn, settings, eos_id: int | None, *, share_prefix: bool = False,
               drop_finished: bool = False, logp_temperature: float | None = None) -> list[list[int]]:
        """Sample ``settings.n`` completions of each left-padded prompt row (``ids``, ``attn``: [P, W]).

        Each prompt is prefilled once and its cache copied to its ``n`` rows; every row then decodes
        until all have written ``eos_id`` or ``settings.max_new_tokens`` tokens. Returns one token list
        per row, prompt-major, each ending at its first ``eos_id`` (kept).

        For a model whose steps cost arithmetic (SmolLM2; :func:`kimina_edu.rollouts.arithmetic_bound`):
        ``share_prefix`` runs the tokens every prompt starts with (the system turn: 72 of SmolLM2's ~111
        prompt tokens) once, for one row, and writes their keys and values into every row's cache;
        ``drop_finished`` takes finished rows out of the batch — and the cache — once they are a quarter
        of it (each removal copies the cache, so not at every finished row).

        ``logp_temperature``: also keep each drawn token's log-probability under softmax(logits / that
        temperature) in :attr:`sampled_logp` (fp32, from the logits the token was drawn from)."""
        import torch
        import torch.nn.functional as F

        n, new = settings.n, settings.max_new_tokens
        self.matmul_rows = []
        attn = attn.bool()
        prompts = ids.shape[0]
        real = [row[mask].tolist() for row, mask in zip(ids, attn)]
        # the shared run, leaving every prompt at least one token of its own (its last position's logits)
        shared = _common_prefix(real, limit=min(map(len, real)) - 1) if share_prefix else 0
        own = max(len(r) for r in real) - shared
        width, rows, d = shared + own, prompts * n, self.head_dim
        total = width + new
        # the layout: [the shared run | each prompt's own tokens, left-padded]
        pad = int(ids[~attn][0]) if (~attn).any() else 0
        ids = torch.tensor([r[:shared] + [pad] * (width - len(r)) + r[shared:] for r in real])
        attn = torch.tensor([[True] * shared + [False] * (width - len(r)) + [True] * (len(r) - shared) for r in real])
        inv_freq = 1.0 / (self.theta ** (torch.arange(0, d, 2, dtype=torch.float) / d))
        freqs = torch.arange(total, dtype=torch.float)[:, None] * inv_freq
        angles = torch.cat((freqs, freqs), dim=-1)
        cos_table, sin_table = angles.cos(), angles.sin()
        cache = [(torch.zeros(prompts, self.kv_heads, total, d), torch.zeros(prompts, self.kv_heads, total, d))
                 for _ in self.layers]
        position = (attn.long().cumsum(-1) - 1).clamp(min=0)
        # a padding column attends to itself, so that no row of the softmax is empty
        mask = (torch.ones(width, width, dtype=torch.bool).tril() & attn[:, None, :]) | torch.eye(width, dtype=torch.bool)

        def shared_attention(q, k, v):  # the shared run: one row, causal
            return F.scaled_dot_product_attention(q, k[:1], v[:1], is_causal=True, enable_gqa=True).transpose(1, 2)

        def prefill_attention(q, k, v):
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask[:, None, shared:], enable_gqa=True).transpose(1, 2)

        bias = torch.zeros(rows, total)  # per key column: 0 where a row may read it, -inf on its prompt's padding
        bias[:, :width].masked_fill_(~attn.repeat_interleave(n, 0), float("-inf"))
        scale = d ** -0.5
        groups = self.heads // self.kv_heads

        def decode_attention(q, k, v):  # one query per row: the query heads of a key/value head side by side
            scores = (q.reshape(q.shape[0], self.kv_heads, groups, d) @ k.transpose(-1, -2)) * scale
            return (scores + bias[:, None, None, : k.shape[2]]).softmax(-1) @ v

        out: list[list[int]] = [[] for _ in range(rows)]
        logps: list[list[float]] = [[] for _ in range(rows)]
        self.sampled_logp = logps if logp_temperature else None
        slots = list(range(rows))  # the output row each batch row writes
        live = set(slots)
        with torch.inference_mode():
            if shared:
                self._layers(self.embed[ids[:1, :shared]], cos_table[:shared], sin_table[:shared], cache, 0,
                             shared_attention, logits=False)
            at = position[:, shared:]
            logits = self._layers(self.embed[ids[:, shared:]], cos_table[at][:, None], sin_table[at][:, None],
                                  cache, shared, prefill_attention).repeat_interleave(n, 0)
            cache = [(k.repeat_interleave(n, 0), v.repeat_interleave(n, 0)) for k, v in cache]
            position = position[:, -1].repeat_interleave(n, 0) + 1
            for step in range(new):
                token = draw_next(logits, settings)
                drawn = token.tolist()
                chosen = (None if not logp_temperature else
                          (logits.float() / logp_temperature).log_softmax(-1).gather(1, token[:, None]).squeeze(1).tolist())
                for i, (row, t) in enumerate(zip(slots, drawn)):
                    if row in live:
                        out[row].append(t)
                        if chosen is not None:
                            logps[row].append(chosen[i])
                        if t == eos_id:
                            live.discard(row)
                if step == new - 1 or not live:
                    break
                if drop_finished and len(live) <= 0.75 * len(slots):
                    keep = torch.tensor([i for i, row in enumerate(slots) if row in live])
                    cache = [(k.index_select(0, keep), v.index_select(0, keep)) for k, v in cache]
                    bias, position = bias[keep], position[keep]
                    drawn = [drawn[i] for i in keep.tolist()]
                    slots = [slots[i] for i in keep.tolist()]
                token = torch.tensor(drawn)
                logits = self._layers(self.embed[token][:, None], cos_table[position][:, None, None],
                                      sin_table[position][:, None, None], cache, width + step, decode_attention)
                position = position + 1
        return out


REFINE_K = 64  # logits a row takes again in fp32 after a bf16 head (SmallLlama._logits)


def _common_prefix(rows: list[list[int]], limit: int) -> int:
    """How many leading tokens all ``rows`` share, at most ``limit``."""
    k = 0
    while k < limit and all(r[k] == rows[0][k] for r in rows):
        k += 1
    return k


def candidates(logits, settings):
    """The tokens :func:`kimina_edu.rollouts.sampling_probs` keeps, without sorting the vocabulary:
    ``(probs, ids)``, each [rows, k], most likely first, the kept probabilities renormalised and the
    others 0.

    Top-p and min-p each keep a run of the most likely tokens, so together they keep the shorter run.
    Min-p's run is read off a count; only that many tokens are ranked (``topk``), and top-p's cut is
    made inside them: a token stays while the mass ranked above it is under ``top_p`` (the rule
    ``generate``'s top-p warper states from the other end). Without min-p every token is ranked.
    """
    import torch

    probs = (logits.float() / settings.temperature).softmax(-1)
    vocab = probs.shape[-1]
    if settings.min_p > 0:
        above = probs >= settings.min_p * probs.max(-1, keepdim=True).values
        k = int(above.sum(-1).max())
    else:
        k = vocab
    top, ids = probs.topk(k, dim=-1) if k < vocab or settings.top_p >= 1 else _top_p_run(probs, settings.top_p)
    keep = torch.ones_like(top, dtype=torch.bool)
    if settings.min_p > 0:
        keep &= top >= settings.min_p * top[:, :1]
    if settings.top_p < 1:
        keep &= (top.cumsum(-1) - top) < settings.top_p
    keep[:, 0] = True  # the most likely token always stays
    kept = top * keep
    return kept / kept.sum(-1, keepdim=True), ids


TOP_P_FIRST_K = 64


def _top_p_run(probs, top_p: float):
    """The most likely tokens of each row, ranked (``topk``), enough of them to hold every token top-p
    keeps: ``k`` starts at :data:`TOP_P_FIRST_K` and doubles until each row's ranked mass reaches
    ``top_p`` — a token past that run has at least ``top_p`` ranked above it, so top-p drops it. A
    trained model's nucleus is a few dozen tokens: ranking SmolLM2's whole 49,152-token vocabulary for
    48 rows took ~96 ms a decoding step, ranking 64 ~2 ms (SmolLM2 sampling 8 questions × 6 on a CPU,
    AMD box, 2026-12-05; benchmarks/README.md, "SmolLM2")."""
    vocab = probs.shape[-1]
    k = min(TOP_P_FIRST_K, vocab)
    while True:
        top, ids = probs.topk(k, dim=-1)
        if k == vocab or bool((top.sum(-1) >= top_p).all()):
            return top, ids
        k = min(2 * k, vocab)


def draw_next(logits, settings):
    """Each row's next token: greedy at ``temperature == 0``, else one draw from :func:`candidates` by
    inverting its cumulative distribution with one uniform number per row from torch's global
    generator (which the trainer seeds and checkpoints). ``generate`` draws from the same
    distribution with ``torch.multinomial``, which spends a random number on every vocabulary entry
    of every row: on the pocket model that was a third of a decoding step."""
    import torch

    if settings.temperature == 0:
        return logits.argmax(-1)
    probs, ids = candidates(logits, settings)
    u = torch.rand(probs.shape[0], 1, dtype=probs.dtype)
    choice = (probs.cumsum(-1) < u).sum(-1).clamp(max=probs.shape[1] - 1)
    return ids.gather(1, choice[:, None]).squeeze(1)
