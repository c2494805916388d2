"""Running a causal LM over a shared prompt prefix with tree-shaped attention (needs the ml extra).

Every query of a book shares the instruction + title + ToC prefix, so its key/value cache is
computed once per book (:meth:`LM.prefix_cache`). Everything after it — query suffixes, the
candidate identifiers of a whole trie, the beams of a beam search, training examples — is fed
as new tokens in which each token has a parent: a token attends to the prefix, its ancestors and
itself, and its position id is its parent's plus one (:class:`TreeCache`). Several independent
trees share a batch row or take one row each. With a chain of parents this is ordinary causal
attention, so the results equal the uncached computation up to float rounding (tested: 4e-5 in
float32); with a trie it scores every leaf identifier in one pass, each shared title prefix
computed once.

The custom 4-D attention mask bypasses the model's own mask construction (transformers returns
4-D masks as given), so models with sliding-window attention shorter than the input are refused,
and the attention implementation is pinned to ``sdpa`` (or ``eager``), which accept such masks.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from searchtome.baselines.generative.common import TokenTrie

from searchtome.errors import SearchTomeError

log = logging.getLogger(__name__)

DTYPES = {
    "float32": torch.float32,
    "fp32": torch.float32,
    "bfloat16": torch.bfloat16,
    "bf16": torch.bfloat16,
    "float16": torch.float16,
    "fp16": torch.float16,
}


def pick_device(device: str = "auto") -> torch.device:
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def cpu_has_bf16() -> bool:
    """Whether this CPU multiplies bfloat16 natively (AVX512-BF16 or AMX); Linux only."""
    from searchtome.hardware import native_bf16

    return native_bf16()


def pick_dtype(dtype: str, device: torch.device) -> torch.dtype:
    """``auto``: bfloat16 on CUDA and on CPUs with native bfloat16 (about twice as fast there),
    float32 elsewhere."""
    if dtype == "auto":
        if device.type == "cuda" or (device.type == "cpu" and cpu_has_bf16()):
            return torch.bfloat16
        return torch.float32
    try:
        return DTYPES[dtype]
    except KeyError:
        from searchtome.errors import unknown_name

        raise unknown_name("dtype", dtype, [*DTYPES, "auto"]) from None


@dataclass
class LM:
    """A causal LM, its tokenizer and the few facts the engine needs about its API."""

    model: Any  # the transformers CausalLM (LoRA layers are injected into it in place)
    tokenizer: Any
    name: str
    eos_id: int
    peft: Any = None  # the PeftModel wrapper once an adapter is attached
    _cache_kw: str = field(init=False, default="cache")
    _keep_kw: bool = field(init=False, default=True)

    def __post_init__(self) -> None:
        params = inspect.signature(self.model.forward).parameters
        self._cache_kw = "cache" if "cache" in params else "past_key_values"
        self._keep_kw = "logits_to_keep" in params
        window = getattr(self.model.config, "sliding_window", None)
        self.sliding_window = int(window) if window else None

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def dtype(self) -> torch.dtype:
        return next(self.model.parameters()).dtype

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` without added BOS/EOS (chat templates carry their own)."""
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def adapter_disabled(self) -> Any:
        import contextlib

        return self.peft.disable_adapter() if self.peft is not None else contextlib.nullcontext()

    def forward(
        self,
        input_ids: torch.Tensor,
        *,
        cache: Any = None,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        keep: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, Any]:
        """``(logits, cache)``. ``keep``: 1-D positions whose logits are wanted, or a 2-D boolean
        ``(batch, seq)`` mask (logits then come flattened, ``(n_true, vocab)``); else all."""
        kwargs: dict[str, Any] = {
            "input_ids": input_ids,
            "attention_mask": attention_mask,
            "position_ids": position_ids,
            "use_cache": cache is not None,
        }
        if cache is not None:
            kwargs[self._cache_kw] = cache
        mask = None
        if keep is not None and keep.dim() == 2:
            # Per-row selections: ask for the union of the columns (a 1-D logits_to_keep works
            # in every transformers version), then pick each row's own.
            mask, keep = keep, keep.any(0).nonzero().flatten()
        if keep is not None and self._keep_kw:
            kwargs["logits_to_keep"] = keep
        out = self.model(**kwargs)
        logits = out.logits
        if keep is not None and not self._keep_kw:
            logits = logits[:, keep]
        if mask is not None:
            logits = logits[mask[:, keep]]
        return logits, getattr(out, self._cache_kw, None)

    def check_length(self, total: int) -> None:
        if self.sliding_window is not None and total > self.sliding_window:
            raise SearchTomeError(
                f"{self.name} uses sliding-window attention ({self.sliding_window} tokens) but "
                f"the prompt needs {total}; tree attention over a cached prefix cannot honour it"
            )

    def prefix_cache(self, prefix_ids: Sequence[int]) -> PrefixKV:
        """Key/value states of the shared prefix, computed once (no gradient)."""
        self.check_length(len(prefix_ids))
        ids = torch.tensor([list(prefix_ids)], device=self.device)
        with torch.no_grad():
            _, cache = self.forward(
                ids, cache=new_cache(self.model.config), keep=ids.new_tensor([0])
            )
        return PrefixKV(kv_of(cache), len(prefix_ids))


def new_cache(config: Any, kv: Sequence[tuple[torch.Tensor, torch.Tensor]] | None = None) -> Any:
    from transformers import DynamicCache

    try:
        return DynamicCache(ddp_cache_data=kv, config=config) if kv else DynamicCache(config=config)
    except TypeError:  # older transformers: no config argument
        return DynamicCache(kv) if kv else DynamicCache()


def kv_of(cache: Any) -> list[tuple[torch.Tensor, torch.Tensor]]:
    layers = getattr(cache, "layers", None)
    if layers is not None:
        return [(layer.keys, layer.values) for layer in layers]
    return [(k, v) for k, v in zip(cache.key_cache, cache.value_cache, strict=True)]


@dataclass
class PrefixKV:
    """Per-layer key/value tensors of a prompt prefix (batch 1), never modified in place."""

    kv: list[tuple[torch.Tensor, torch.Tensor]]
    length: int

    def nbytes(self) -> int:
        return sum(k.numel() * k.element_size() + v.numel() * v.element_size() for k, v in self.kv)


def load_lm(
    name_or_path: str,
    *,
    dtype: str = "float32",
    device: str = "auto",
    attn_implementation: str = "sdpa",
) -> LM:
    """Load a causal LM and its tokenizer; ``smollm2`` resolves to the offline model."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from searchtome.llm.models import resolve
    from searchtome.settings import hf_offline_env

    if attn_implementation not in {"sdpa", "eager"}:
        raise SearchTomeError(
            f"attn_implementation {attn_implementation!r}: tree attention needs 'sdpa' or 'eager'"
        )
    hf_offline_env()
    path = resolve(name_or_path)
    dev = pick_device(device)
    torch_dtype = pick_dtype(dtype, dev)
    log.info("loading %s (%s, %s)", path, torch_dtype, dev)
    try:
        tokenizer = AutoTokenizer.from_pretrained(path)
        model = AutoModelForCausalLM.from_pretrained(
            path, dtype=torch_dtype, attn_implementation=attn_implementation
        )
    except OSError as exc:
        raise SearchTomeError(f"cannot load model {name_or_path!r}: {exc}") from None
    model.to(dev)
    model.eval()
    eos = tokenizer.eos_token_id
    if eos is None:
        eos = model.config.eos_token_id
    if isinstance(eos, list):
        eos = eos[0]
    if eos is None:
        raise SearchTomeError(f"{name_or_path}: the tokenizer defines no EOS token")
    return LM(model=model, tokenizer=tokenizer, name=name_or_path, eos_id=int(eos))


class TreeCache:
    """Rows of growing token trees after a shared prefix; each token attends to the prefix, its
    ancestors and itself.

    Every row is one independent tree (a query with its beams, a training example, a trie) in
    the batch dimension, so a token's attention covers the prefix and its own row only. Token
    indices are per row (0, 1, ... in the order added); a parent of ``-1`` hangs a token directly
    under the prefix. Rows get the same number of new tokens per call: shorter ones are padded
    with tokens that only see themselves and are never used as parents.
    """

    def __init__(self, lm: LM, prefix: PrefixKV | None = None, rows: int = 1) -> None:
        self.lm = lm
        self.rows = rows
        self.prefix_len = prefix.length if prefix is not None else 0
        kv = None
        if prefix is not None:
            kv = [(k.expand(rows, -1, -1, -1), v.expand(rows, -1, -1, -1)) for k, v in prefix.kv]
        self.cache = new_cache(lm.model.config, kv)
        self.length = 0  # tokens per row so far (pads included)
        self.positions = torch.zeros((rows, 0), dtype=torch.long)
        self.anc = torch.zeros((rows, 0, 0), dtype=torch.bool)

    def select_rows(self, rows: Sequence[int]) -> None:
        """Keep only these rows (in this order), e.g. queries whose search is still open."""
        idx = torch.tensor(list(rows), dtype=torch.long)
        self.cache.batch_select_indices(idx.to(self.lm.device))
        self.anc = self.anc[idx]
        self.positions = self.positions[idx]
        self.rows = len(idx)

    def extend(
        self,
        tokens: Sequence[Sequence[int]],
        parents: Sequence[Sequence[int]],
        *,
        keep: Sequence[Sequence[int]] | None = None,
    ) -> torch.Tensor:
        """Add tokens to every row; return the logits of the kept new tokens (indices into each
        row's ``tokens``; all when ``keep`` is None) stacked row by row: ``(n_kept, vocab)``.

        ``parents[r][i]`` is a row-local index of an earlier token (possibly added in this call)
        or -1 for the prefix.
        """
        if len(tokens) != self.rows or len(parents) != self.rows:
            raise ValueError(f"extend() needs {self.rows} rows")
        n = max(len(t) for t in tokens)
        if n == 0:
            raise ValueError("extend() needs at least one token")
        start, total = self.length, self.length + n
        anc = torch.zeros((self.rows, total, total), dtype=torch.bool)
        anc[:, :start, :start] = self.anc
        pos = torch.zeros((self.rows, total), dtype=torch.long)
        pos[:, :start] = self.positions
        ids = torch.full((self.rows, n), self.lm.eos_id, dtype=torch.long)
        for r in range(self.rows):
            row_tokens, row_parents = tokens[r], parents[r]
            if len(row_tokens) != len(row_parents):
                raise ValueError("tokens and parents differ in length")
            for i, parent in enumerate(row_parents):
                g = start + i
                if parent >= g:
                    raise ValueError(f"token {g}: parent {parent} is not earlier")
                if parent >= 0:
                    anc[r, g, :g] = anc[r, parent, :g]
                    anc[r, g, parent] = True
                    pos[r, g] = pos[r, parent] + 1
                else:
                    pos[r, g] = self.prefix_len
            ids[r, : len(row_tokens)] = torch.tensor(list(row_tokens), dtype=torch.long)
        idx = torch.arange(start, total)
        anc[:, idx, idx] = True  # every token, pads included, sees itself
        self.anc, self.positions, self.length = anc, pos, total
        self.lm.check_length(int(pos.max()) + 1 if pos.numel() else 0)
        device, dtype = self.lm.device, self.lm.dtype
        visible = torch.ones((self.rows, n, self.prefix_len + total), dtype=torch.bool)
        visible[:, :, self.prefix_len :] = anc[:, start:]
        mask = torch.zeros(visible.shape, dtype=dtype)
        mask.masked_fill_(~visible, torch.finfo(dtype).min)
        select = None
        if keep is not None:
            select = torch.zeros((self.rows, n), dtype=torch.bool)
            for r, row_keep in enumerate(keep):
                select[r, list(row_keep)] = True
        else:
            select = torch.zeros((self.rows, n), dtype=torch.bool)
            for r, row_tokens in enumerate(tokens):
                select[r, : len(row_tokens)] = True
        logits, self.cache = self.lm.forward(
            ids.to(device),
            cache=self.cache,
            attention_mask=mask[:, None].to(device),
            position_ids=pos[:, start:].to(device),
            keep=select.to(device),
        )
        return logits


# -- exact ranking --------------------------------------------------------------------------------


def chain(n: int, first_parent: int, offset: int) -> list[int]:
    """Parents of ``n`` tokens fed in a row from ``offset``: each token's parent is the one
    before it, the first one's is ``first_parent`` (-1: the prefix)."""
    return [first_parent if i == 0 else offset + i - 1 for i in range(n)]


@torch.no_grad()
def score_trie(
    lm: LM,
    prefix: PrefixKV | None,
    suffix_ids: Sequence[int],
    trie: TokenTrie,
    *,
    chunk: int = 1024,
) -> dict[str, float]:
    """log P(identifier + EOS | prefix + suffix) for every identifier of the trie, exactly.

    The suffix is one chain under the prefix; the trie's nodes hang under its last token and
    are fed in chunks of ``chunk`` tokens (parents always precede children), so memory stays
    bounded while each distinct token prefix is computed once.
    """
    tree = TreeCache(lm, prefix)
    n_suf = len(suffix_ids)
    if n_suf == 0:
        raise SearchTomeError("empty query suffix")
    first = tree.extend([list(suffix_ids)], [chain(n_suf, -1, 0)], keep=[[n_suf - 1]])
    root_logp = torch.log_softmax(first[-1].float(), dim=-1)
    tokens, parents, _ = trie.flatten()
    # Row index of trie node j (0-based, root excluded) is n_suf + j.
    node_logp: list[torch.Tensor | None] = [None] * len(tokens)
    score = [0.0] * len(tokens)
    for lo in range(0, len(tokens), chunk):
        hi = min(lo + chunk, len(tokens))
        idx = list(range(lo, hi))
        # Only nodes with children need their own next-token distribution.
        need = [j for j in idx if trie.children[j + 1]]
        pars = [n_suf - 1 if parents[j] < 0 else n_suf + parents[j] for j in idx]
        logits = tree.extend(
            [[tokens[j] for j in idx]], [pars], keep=[[j - lo for j in need] if need else [0]]
        )
        if need:
            logp = torch.log_softmax(logits.float(), dim=-1)
            for row, j in enumerate(need):
                node_logp[j] = logp[row]
    for j, tok in enumerate(tokens):
        p = parents[j]
        dist = root_logp if p < 0 else node_logp[p]
        score[j] = (0.0 if p < 0 else score[p]) + float(dist[tok])
    return {key: score[node - 1] for node, key in trie.terminal.items()}


@torch.no_grad()
def score_uncached(
    lm: LM,
    prompt_ids: Sequence[int],
    candidates: Mapping[str, Sequence[int]],
    *,
    batch_size: int = 8,
) -> dict[str, float]:
    """The reference: each candidate scored on the full prompt with plain causal attention."""
    pad = lm.tokenizer.pad_token_id if lm.tokenizer.pad_token_id is not None else lm.eos_id
    keys = list(candidates)
    out: dict[str, float] = {}
    p = len(prompt_ids)
    for lo in range(0, len(keys), batch_size):
        part = keys[lo : lo + batch_size]
        seqs = [list(prompt_ids) + list(candidates[k]) for k in part]
        width = max(len(s) for s in seqs)
        ids = torch.full((len(seqs), width), pad, dtype=torch.long)
        att = torch.zeros((len(seqs), width), dtype=torch.long)
        keep = torch.zeros((len(seqs), width), dtype=torch.bool)  # positions predicting a target
        for i, s in enumerate(seqs):
            ids[i, : len(s)] = torch.tensor(s)
            att[i, : len(s)] = 1
            keep[i, p - 1 : len(s) - 1] = True
        logits, _ = lm.forward(
            ids.to(lm.device), attention_mask=att.to(lm.device), keep=keep.to(lm.device)
        )
        logp = torch.log_softmax(logits.float(), dim=-1)  # (kept positions, vocab), row-major
        row = 0
        for k in part:
            cand = list(candidates[k])
            rows = torch.arange(row, row + len(cand), device=lm.device)
            out[k] = float(logp[rows, torch.tensor(cand, device=lm.device)].sum())
            row += len(cand)
    return out


# -- batch layout ---------------------------------------------------------------------------------


def auto_group(lm: LM, group: int, n: int) -> int:
    """Items per batch row: ``group`` if set, else all of them on CPU (one tree; less memory
    traffic than copying the prefix into every row) and one per row on GPU."""
    if group > 0:
        return group
    return max(n, 1) if lm.device.type == "cpu" else 1


def decode_text(lm: LM, tokens: Sequence[int]) -> str:
    toks = [t for t in tokens if t != lm.eos_id]
    return lm.tokenizer.decode(toks, skip_special_tokens=True).strip()


def rank_from_scores(scores: Mapping[str, float]) -> list[tuple[str, float]]:
    """Best first; equal scores ordered by key so the ranking is deterministic."""
    return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))
