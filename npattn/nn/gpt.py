"""The book's GPT (chapter 4): TransformerBlock, GPTModel and generate_text_simple.

Configured by the book's dict (``GPT_CONFIG_124M``), with the book's attribute names, so the
state_dict keys are the book's (``tok_emb.weight``, ``trf_blocks.0.att.W_query.weight``,
``trf_blocks.0.ff.layers.0.bias``, ``final_norm.scale``, ``out_head.weight``, ...). The attention
is chapter 3's ``MultiHeadAttention``; everything else is ``npattn.nn.transformer``'s layers and
the stage pairs of ``npattn.nn.functional``. ``GPTModel.backward(dlogits)`` runs every stage's
backward in reverse and fills every parameter's ``.grad``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from npattn._checks import (
    as_array,
    check_bool,
    check_bytes,
    check_float_dtype,
    check_grad_output,
    check_int64_ids,
    check_nonnegative_int,
    check_positive_int,
    check_probability,
    shown,
)
from npattn.errors import ConfigError, DTypeError, ShapeError
from npattn.nn import functional as F
from npattn.nn.attention import MultiHeadAttention
from npattn.nn.functional.transformer import refuse_bool_ids
from npattn.nn.layers import Dropout, Linear
from npattn.nn.module import Module, Parameter
from npattn.nn.sequential import Sequential
from npattn.nn.transformer import Embedding, FeedForward, LayerNorm, check_config
from npattn.random import RNGLike, resolve_rng

__all__ = [
    "GPT_CONFIG_124M",
    "GPTModel",
    "TransformerBlock",
    "check_context_size",
    "check_next_logits",
    "check_prompt",
    "generate_text_simple",
]

GPT_CONFIG_124M = {
    "vocab_size": 50257,  # GPT-2's BPE vocabulary
    "context_length": 1024,
    "emb_dim": 768,
    "n_heads": 12,
    "n_layers": 12,
    "drop_rate": 0.1,
    "qkv_bias": False,
}
"""The book's configuration of the smallest GPT-2 (163,009,536 parameters without weight tying)."""


def _checked(cfg: Any) -> dict[str, Any]:
    """The book's config, every value checked and made a plain Python int, float or bool (a NumPy
    scalar such as ``np.int64(8)`` becomes ``8``: ``model.cfg`` is what a checkpoint stores as JSON).
    Raises ConfigError naming the bad key."""
    cfg = check_config(cfg)
    for key in ("vocab_size", "context_length", "emb_dim", "n_heads", "n_layers"):
        cfg[key] = check_positive_int(cfg[key], f"cfg[{key!r}]")
    cfg["drop_rate"] = check_probability(cfg["drop_rate"], "cfg['drop_rate']")
    cfg["qkv_bias"] = check_bool(cfg["qkv_bias"], "cfg['qkv_bias']")
    if cfg["emb_dim"] % cfg["n_heads"]:
        raise ConfigError(
            f"cfg['emb_dim'] must be divisible by cfg['n_heads'], got emb_dim={cfg['emb_dim']} and "
            f"n_heads={cfg['n_heads']}"
        )
    return cfg


def _check_size(cfg: dict[str, Any], dtype: Any) -> None:
    """Refuse, before building anything, a GPT whose parameters and causal masks exceed memory."""
    v, n, e, layers = cfg["vocab_size"], cfg["context_length"], cfg["emb_dim"], cfg["n_layers"]
    per_block = 12 * e * e + (16 if cfg["qkv_bias"] else 13) * e  # attention, feed forward, two layer norms
    weights = layers * per_block + 2 * v * e + n * e + 2 * e  # + embeddings, output head, final norm
    nbytes = weights * check_float_dtype(dtype).itemsize + layers * (n * n + 16384)  # + a mask and objects per block
    check_bytes(
        nbytes,
        f"GPTModel(cfg) with vocab_size={v}, context_length={n}, emb_dim={e}, n_layers={layers}: "
        f"{weights:,} parameters, {layers} causal masks and blocks",
    )


class TransformerBlock(Module):
    """The book's ``TransformerBlock(cfg)`` (listing 4.6): pre-norm attention and feed-forward,
    each followed by dropout (``drop_shortcut``) and added back to its input (the shortcut):

        x = x + drop_shortcut(att(norm1(x)))
        x = x + drop_shortcut(ff(norm2(x)))

    Drawn in the book's order: ``att`` (W_query, W_key, W_value, out_proj), then ``ff``.
    ``drop_shortcut`` is used twice per forward, as in the book; each use draws its own keep mask
    (or uses ``drop_shortcut.fixed_keep`` for both).

    forward: x (b, n, emb_dim), n <= context_length -> (b, n, emb_dim).

    Raises:
        ConfigError: a cfg key missing or out of range; a bad rng or impl.
        ShapeError, DTypeError: an input of the wrong shape or kind. BackwardError: backward first.
    """

    def __init__(
        self, cfg: dict[str, Any], *, rng: RNGLike = None, dtype: Any = np.float32, impl: str = "auto"
    ) -> None:
        super().__init__()
        cfg = _checked(cfg)
        self.cfg = cfg  # what rebuilds it (a checkpoint's config)
        generator = resolve_rng(rng)
        self.att = MultiHeadAttention(
            d_in=cfg["emb_dim"],
            d_out=cfg["emb_dim"],
            context_length=cfg["context_length"],
            num_heads=cfg["n_heads"],
            dropout=cfg["drop_rate"],
            qkv_bias=cfg["qkv_bias"],
            rng=generator,
            dtype=dtype,
            impl=impl,
        )
        self.ff = FeedForward(cfg, rng=generator, dtype=dtype)
        self.norm1 = LayerNorm(cfg["emb_dim"], dtype=dtype)
        self.norm2 = LayerNorm(cfg["emb_dim"], dtype=dtype)
        self.drop_shortcut = Dropout(cfg["drop_rate"], rng=generator)

    @property
    def drop_resid(self) -> Dropout:
        """The name npattn used before it took the book's ``drop_shortcut`` (read-only alias)."""
        return self.drop_shortcut

    def _drop(self, x: np.ndarray) -> tuple[np.ndarray, tuple | None]:
        """drop_shortcut(x) as a stage (the module is used twice, so the block keeps both caches)."""
        keep = self.drop_shortcut.keep_mask(x.shape)
        if keep is None:
            return x, None
        return F.dropout_forward(x, keep, self.drop_shortcut.p)

    def forward(self, x: Any) -> np.ndarray:
        """x (b, n, emb_dim) -> (b, n, emb_dim)."""
        x = as_array(x, "x").astype(self.norm1.scale.dtype, copy=False)
        if x.ndim != 3 or x.shape[-1] != self.norm1.emb_dim:
            raise ShapeError(f"x: expected shape (batch, n, emb_dim={self.norm1.emb_dim}), got shape {x.shape}")
        # Shortcut connection for the attention block.
        h = self.att(self.norm1(x))
        h, c_drop1 = self._drop(h)
        x, c_add1 = F.add_forward(h, x)
        # Shortcut connection for the feed-forward block.
        h = self.ff(self.norm2(x))
        h, c_drop2 = self._drop(h)
        x, c_add2 = F.add_forward(h, x)
        self._cache = (c_drop1, c_add1, c_drop2, c_add2, x.shape)
        return x

    def _gradients(self, grad_output: Any) -> tuple[np.ndarray, list[tuple[Parameter, np.ndarray]]]:
        """grad_output (b, n, emb_dim) -> dx and the gradients of every parameter of the block
        (``backward`` accumulates them all after checking every ``.grad``)."""
        c_drop1, c_add1, c_drop2, c_add2, shape = self._saved()
        d_x = check_grad_output(grad_output, shape, self.norm1.scale.dtype)
        grads: list[tuple[Parameter, np.ndarray]] = []
        # forward: x = h + shortcut, h = drop_shortcut(ff(norm2(shortcut)))
        d_h, d_shortcut = F.add_backward(d_x, c_add2)
        if c_drop2 is not None:
            (d_h,) = F.dropout_backward(d_h, c_drop2)
        d_x = self._child_gradients(self.norm2, self._child_gradients(self.ff, d_h, grads), grads) + d_shortcut
        # forward: x = h + shortcut, h = drop_shortcut(att(norm1(shortcut)))
        d_h, d_shortcut = F.add_backward(d_x, c_add1)
        if c_drop1 is not None:
            (d_h,) = F.dropout_backward(d_h, c_drop1)
        return self._child_gradients(self.norm1, self._child_gradients(self.att, d_h, grads), grads) + d_shortcut, grads


class GPTModel(Module):
    """The book's ``GPTModel(cfg)`` (listing 4.7): token and position embeddings, dropout,
    ``n_layers`` TransformerBlocks, a final LayerNorm and a bias-free output head to ``vocab_size``
    logits.

    ``cfg`` is the book's dict (``vocab_size``, ``context_length``, ``emb_dim``, ``n_heads``,
    ``n_layers``, ``drop_rate``, ``qkv_bias``); ``rng``, ``dtype`` and ``impl`` (how attention's
    stages 2-5 run) are keyword-only. Parameters are drawn in PyTorch's construction order
    (tok_emb, pos_emb, each block, out_head) from one generator: an int seed is torch's seed.

    forward: in_idx (b, n) integer token ids, n <= context_length -> logits (b, n, vocab_size).
    backward(dlogits) -> None: fills every parameter's ``.grad`` (the ids have no gradient).

    Raises:
        ConfigError: a cfg key missing or out of range; a bad rng or impl; a token id outside
            [0, vocab_size) (forward).
        ShapeError: in_idx not (b, n), or n > context_length. DTypeError: ids that are not integers.
        BackwardError: backward before forward.
    """

    def __init__(
        self, cfg: dict[str, Any], *, rng: RNGLike = None, dtype: Any = np.float32, impl: str = "auto"
    ) -> None:
        super().__init__()
        cfg = _checked(cfg)
        _check_size(cfg, dtype)
        self.cfg = cfg
        generator = resolve_rng(rng)
        self.tok_emb = Embedding(cfg["vocab_size"], cfg["emb_dim"], rng=generator, dtype=dtype)
        self.pos_emb = Embedding(cfg["context_length"], cfg["emb_dim"], rng=generator, dtype=dtype)
        self.drop_emb = Dropout(cfg["drop_rate"], rng=generator)
        self.trf_blocks = Sequential(
            *[TransformerBlock(cfg, rng=generator, dtype=dtype, impl=impl) for _ in range(cfg["n_layers"])]
        )
        self.final_norm = LayerNorm(cfg["emb_dim"], dtype=dtype)
        self.out_head = Linear(cfg["emb_dim"], cfg["vocab_size"], bias=False, rng=generator, dtype=dtype)

    def extra_repr(self) -> str:
        return ", ".join(f"{k}={v!r}" for k, v in self.cfg.items())

    def forward(self, in_idx: Any) -> np.ndarray:
        """in_idx (b, n) -> logits (b, n, vocab_size)."""
        given, in_idx = in_idx, np.asarray(in_idx)
        refuse_bool_ids(given, in_idx, "in_idx")
        if in_idx.ndim != 2:
            raise ShapeError(f"in_idx: expected token ids of shape (batch, n), got shape {in_idx.shape}")
        if in_idx.dtype.kind not in "iu":
            raise DTypeError(f"in_idx: expected integer token ids, got dtype {in_idx.dtype}")
        n = in_idx.shape[1]
        if n > self.cfg["context_length"]:
            raise ShapeError(
                f"in_idx: sequence length n={n} exceeds context_length={self.cfg['context_length']}; "
                f"crop the input (the book's generate_text_simple keeps the last context_size tokens)"
            )
        tok_embeds = self.tok_emb(in_idx)
        pos_embeds = self.pos_emb(np.arange(n))
        x, c_add = F.add_forward(tok_embeds, pos_embeds)  # (b, n, emb_dim)
        x = self.drop_emb(x)
        x = self.trf_blocks(x)
        x = self.final_norm(x)
        logits = self.out_head(x)
        self._cache = (c_add,)
        return logits

    def _gradients(self, grad_output: Any) -> tuple[None, list[tuple[Parameter, np.ndarray]]]:
        """dlogits (b, n, vocab_size) -> None and every parameter's gradient: ``backward`` checks
        every ``.grad`` in the model before it changes any (frozen parameters get nothing)."""
        (c_add,) = self._saved()
        grads: list[tuple[Parameter, np.ndarray]] = []
        d_x = self._child_gradients(self.out_head, grad_output, grads)
        d_x = self._child_gradients(self.final_norm, d_x, grads)
        d_x = self._child_gradients(self.trf_blocks, d_x, grads)
        d_x = self._child_gradients(self.drop_emb, d_x, grads)
        # forward: x = tok_embeds + pos_embeds, pos_embeds broadcast over the batch
        d_tok, d_pos = F.add_backward(d_x, c_add)
        self._child_gradients(self.tok_emb, d_tok, grads)
        self._child_gradients(self.pos_emb, d_pos, grads)
        return None, grads


def generate_text_simple(model: Module, idx: Any, max_new_tokens: int, context_size: int) -> np.ndarray:
    """The book's greedy decoding (listing 4.8): append the argmax of the last position's logits,
    ``max_new_tokens`` times, feeding the model at most the last ``context_size`` tokens.

    idx (b, n) integer ids -> (b, n + max_new_tokens) int64. Call ``model.eval()`` first, as the book
    does, unless dropout is wanted.

    Raises:
        ConfigError: max_new_tokens not an integer >= 0, context_size not a positive integer.
        ShapeError: idx not 2-D. DTypeError: idx not integers. ConfigError: an empty prompt (n = 0),
            a context_size above a GPTModel's context_length, logits holding NaN or inf.
    """
    max_new_tokens = check_nonnegative_int(max_new_tokens, "max_new_tokens")
    context_size = check_positive_int(context_size, "context_size")
    given, idx = idx, np.asarray(idx)
    refuse_bool_ids(given, idx, "idx")
    if idx.ndim != 2:
        raise ShapeError(f"idx: expected token ids of shape (batch, n), got shape {idx.shape}")
    if idx.dtype.kind not in "iu":
        raise DTypeError(f"idx: expected integer token ids, got dtype {idx.dtype}")
    check_prompt(idx, max_new_tokens)
    check_context_size(model, context_size)
    check_int64_ids(idx)
    idx = idx.astype(np.int64)
    for _ in range(max_new_tokens):
        logits = model(idx[:, -context_size:])
        idx_next = np.argmax(check_next_logits(logits[:, -1, :]), axis=-1)[:, None]  # (b, 1)
        idx = np.concatenate([idx, idx_next], axis=1)
    return idx


def check_prompt(idx: np.ndarray, max_new_tokens: int) -> None:
    """Generation continues a prompt: ``idx`` (batch, n) needs n >= 1 to generate anything.

    Raises:
        ConfigError: an empty prompt (n = 0) with ``max_new_tokens`` > 0 (the model's logits for
            no tokens have no last position to pick the next token from); n + ``max_new_tokens``
            longer than any array can be (2**63 - 1 tokens), which no loop would ever finish.
    """
    longest = np.iinfo(np.int64).max
    if max_new_tokens > longest - idx.shape[1]:
        raise ConfigError(
            f"max_new_tokens must be at most {longest - idx.shape[1]} for a prompt of {idx.shape[1]} tokens (no "
            f"array holds more than 2**63 - 1 tokens a row), got {shown(max_new_tokens)}"
        )
    if max_new_tokens and idx.shape[1] == 0:
        raise ConfigError(
            f"idx: an empty prompt (shape {idx.shape}) has no last token to continue from; start it with "
            "at least one token id (GPT-2's '<|endoftext|>' is 50256)"
        )


def check_context_size(model: Any, context_size: int) -> None:
    """A GPTModel reads at most ``cfg["context_length"]`` tokens: a larger ``context_size`` would
    fail only at the token past it, after the work before it.

    Raises:
        ConfigError: naming both numbers.
    """
    if isinstance(model, GPTModel) and context_size > model.cfg["context_length"]:
        raise ConfigError(
            f"context_size={context_size} exceeds the model's context_length={model.cfg['context_length']}: "
            "the model reads at most that many tokens (pass its context_length)"
        )


def check_next_logits(logits: np.ndarray) -> np.ndarray:
    """The last position's logits (batch, vocab) have a largest value and a distribution in every
    row: no NaN, no +inf, not only -inf (-inf alone masks a token out, as top-k does).

    Raises:
        ConfigError: naming the first bad row (torch.multinomial refuses such probabilities too).
    """
    logits = np.asarray(logits, dtype=np.float64)
    bad = np.isnan(logits).any(axis=-1) | (logits == np.inf).any(axis=-1) | (logits == -np.inf).all(axis=-1)
    if bad.any():
        raise ConfigError(
            f"the model's logits for the next token of row {int(np.flatnonzero(bad)[0])} hold NaN or inf (or only "
            "-inf): there is no distribution to sample from nor a largest logit; check the model's weights for "
            "NaN or inf"
        )
    return logits
