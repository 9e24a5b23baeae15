"""Bad inputs of the stage pairs' contract (npattn/nn/functional/contract.py), the random streams'
bounds and gradients that share memory, as rows of tests/test_errors.py's table (entry, what,
call, error, fragment)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from unittest import mock

import numpy as np

import npattn
from npattn import kernels
from npattn.nn import functional as F
from npattn.nn import losses
from npattn.optim import SGD
from npattn.random import TorchGenerator

CFG = {"vocab_size": 11, "context_length": 4, "emb_dim": 4, "n_heads": 2, "n_layers": 1, "drop_rate": 0.0,
       "qkv_bias": False}  # fmt: skip


def _16_gib(call: Callable[[], Any]) -> Callable[[], Any]:
    """``call`` as if this machine had 16 GiB of memory (so the message does not depend on it)."""

    def run() -> Any:
        with mock.patch("npattn._checks.physical_memory", return_value=16 * 2**30):
            return call()

    return run


def _sharing(share: Callable[[npattn.Module], None]) -> Callable[[], Any]:
    def run() -> Any:
        model = npattn.SelfAttention_v1(3, 2, rng=0)
        model(np.ones((4, 3)))
        share(model)
        return model.backward(np.ones((4, 2)))

    return run


def stage_bad_inputs() -> list[tuple[str, str, Callable[[], Any], type[Exception], str]]:
    s, q, v = np.ones((3, 3)), np.ones((4, 3)), np.ones((4, 2))
    project = F.project_forward(q, np.ones((3, 2)))[1]
    scores = F.scores_forward(q, q)[1]
    softmax = F.softmax_forward(s, 0.5)[1]
    reference = F.attention_forward(q, q, v)[1]
    kernel = kernels.attention(q, q, v)[1]
    return [
        ("F.softmax_forward(scores, scale)", "scale NaN (was NaN weights)", lambda: F.softmax_forward(s, np.nan),
         npattn.ConfigError, "softmax_forward: scale must be a finite number, got nan"),
        ("F.softmax_forward(scores, scale)", "an array as scale (was broadcast)",
         lambda: F.softmax_forward(s, np.array([1.0, 2.0, 3.0])), npattn.ConfigError,
         "softmax_forward: scale must be a real number, got ndarray of shape (3,)"),
        ("F.softmax_forward(scores, scale)", "a string as scale", lambda: F.softmax_forward(s, "0.5"),
         npattn.ConfigError, "scale must be a real number, got str '0.5'"),
        ("F.softmax(z, axis)", "an axis z does not have", lambda: F.softmax(s, axis=2), npattn.ShapeError,
         "softmax: axis=2 is not an axis of z"),
        ("F.dropout_forward(w, keep, p)", "an int keep mask (a 2 doubled a weight)",
         lambda: F.dropout_forward(np.ones((2, 2)), np.array([[2, 0], [1, 1]]), 0.5), npattn.DTypeError,
         "dropout_forward: keep must be a bool array (True = kept), got dtype int64"),
        ("F.dropout_forward(w, keep, p)", "p as a string", lambda: F.dropout_forward(s, s > 0, "0.5"),
         npattn.ConfigError, "dropout_forward: p must be a number in [0, 1), got '0.5'"),
        ("F.mask_forward(scores, mask)", "a float mask (0.5 masked everything)",
         lambda: F.mask_forward(s, np.full((3, 3), 0.5)), npattn.DTypeError,
         "mask_forward: mask must be a bool array (True = masked), got dtype float64"),
        ("F.layer_norm_forward(x, scale, shift, eps)", "eps as a string",
         lambda: F.layer_norm_forward(q, np.ones(3), np.ones(3), eps="1e-5"), npattn.ConfigError,
         "layer_norm_forward: eps must be a real number, got str '1e-5'"),
        ("F.split_heads_forward(x, h)", "num_heads a float", lambda: F.split_heads_forward(np.ones((2, 4, 6)), 2.0),
         npattn.ConfigError, "split_heads_forward: num_heads must be a positive integer, got 2.0 (float)"),
        ("F.split_heads_forward(x, h)", "num_heads 0 (was 'divisible by 0')",
         lambda: F.split_heads_forward(np.ones((2, 4, 6)), 0), npattn.ConfigError,
         "split_heads_forward: num_heads must be a positive integer, got 0"),
        ("F.token_cross_entropy_forward(logits, targets, ignore_index)", "ignore_index a float",
         lambda: F.token_cross_entropy_forward(q, np.zeros(4, int), 1.5), npattn.ConfigError,
         "ignore_index must be an integer, got 1.5"),
        ("F.project_backward(d, cache)", "a complex gradient (came back complex)",
         lambda: F.project_backward(np.ones((4, 2)) * 1j, project), npattn.DTypeError,
         "project_backward: d_out must hold real numbers (float or int), got dtype complex128"),
        ("F.softmax_backward(d, cache)", "a bool gradient", lambda: F.softmax_backward(s > 0, softmax),
         npattn.DTypeError, "softmax_backward: d_attn_weights must hold real numbers (float or int), got dtype bool"),
        ("F.project_backward(d, cache)", "None as the cache", lambda: F.project_backward(v, None),
         npattn.ConfigError, "project_backward: cache must be the cache project_forward returned, got NoneType"),
        ("F.project_backward(d, cache)", "a tuple of the wrong length", lambda: F.project_backward(v, (q,)),
         npattn.ConfigError, "got a tuple of length 1 (that forward's cache holds 2 items)"),
        ("F.project_backward(d, cache)", "another stage's cache", lambda: F.project_backward(v, scores),
         npattn.ConfigError, "got the cache scores_forward returned"),
        ("mse_loss_forward(input, target)", "a complex input (gave a complex loss)",
         lambda: losses.mse_loss_forward(q * 1j, q), npattn.DTypeError,
         "mse_loss_forward: input must hold real numbers (float or int), got dtype complex128"),
        ("F.token_cross_entropy_backward(d_loss, cache)", "None as the cache",
         lambda: F.token_cross_entropy_backward(1.0, None), npattn.ConfigError,
         "token_cross_entropy_backward: cache must be the cache token_cross_entropy_forward returned"),
        ("F.attention_forward(q, k, v)", "dropout_p without dropout_keep (ran no dropout)",
         lambda: F.attention_forward(q, q, v, dropout_p=0.5), npattn.ConfigError,
         "attention_forward: dropout_p=0.5 needs dropout_keep"),
        ("F.attention_forward(q, k, v)", "dropout_keep that drops weights with dropout_p=0 (was unscaled)",
         lambda: F.attention_forward(q, q, v, dropout_keep=np.eye(len(q), dtype=bool)), npattn.ConfigError,
         "attention_forward: dropout_keep drops"),
        ("F.dropout_forward(w, keep, p)", "keep that drops weights with p=0 (was unscaled)",
         lambda: F.dropout_forward(np.ones((3, 3)), np.eye(3, dtype=bool), 0.0), npattn.ConfigError,
         "dropout_forward: keep drops 6 of 9 weights but p=0.0"),
        ("F.attention_backward(d, cache)", "kernels.attention's cache",
         lambda: F.attention_backward(v, kernel), npattn.ConfigError, "got the cache kernels.attention returned"),
        ("kernels.attention(q, k, v)", "dropout_p without dropout_keep (ran no dropout)",
         lambda: kernels.attention(q, q, v, dropout_p=0.5), npattn.ConfigError,
         "attention: dropout_p=0.5 needs dropout_keep"),
        ("kernels.attention(q, k, v)", "dropout_keep that drops weights with dropout_p=0 (was unscaled)",
         lambda: kernels.attention(q, q, v, dropout_keep=np.eye(len(q), dtype=bool)), npattn.ConfigError,
         "attention: dropout_keep drops"),
        ("kernels.attention(q, k, v)", "head dimension 0 (was ZeroDivisionError)",
         lambda: kernels.attention(np.zeros((3, 0)), np.zeros((3, 0)), np.ones((3, 2))), npattn.ShapeError,
         "queries and keys need k >= 1 (the scale is 1/sqrt(k))"),
        ("kernels.attention_backward(d, cache)", "F.attention_forward's cache",
         lambda: kernels.attention_backward(v, reference), npattn.ConfigError,
         "got the cache attention_forward returned"),
        ("TorchGenerator.uniform(shape, low, high)", "float32 bounds whose span overflows (was inf)",
         lambda: TorchGenerator(1).uniform((3,), -3e38, 3e38), npattn.ConfigError,
         "high - low to be finite in float32"),
        ("TorchGenerator.rand(*size)", "4 TiB of samples (was MemoryError)",
         _16_gib(lambda: TorchGenerator(1).rand(2**20, 2**20)), npattn.ConfigError,
         "rand of shape (1048576, 1048576) would need 4,398,046,511,104 bytes"),
        ("TorchGenerator.set_state(state)", "an unknown key (was ignored)",
         lambda: TorchGenerator(0).set_state({**TorchGenerator(0).get_state(), "sede": 1}), npattn.ConfigError,
         "generator state has unknown key(s) ['sede']"),
        ("module.backward(grad_output)", "two .grad attributes sharing one array",
         _sharing(lambda m: setattr(m.W_query, "grad", m.W_key.grad)), npattn.BackwardError,
         "W_query.grad shares memory with W_key.grad"),
        ("module.backward(grad_output)", "a .grad that is its weight's data (the weight changed)",
         _sharing(lambda m: setattr(m.W_query, "grad", m.W_query.data)), npattn.BackwardError,
         "W_query.grad shares memory with its own .data"),
        ("module.zero_grad(set_to_none)", "set_to_none not a bool",
         lambda: npattn.SelfAttention_v1(3, 2, rng=0).zero_grad(set_to_none="yes"), npattn.ConfigError,
         "set_to_none must be True or False, got 'yes'"),
        ("optimizer.zero_grad(set_to_none)", "set_to_none not a bool",
         lambda: SGD(npattn.SelfAttention_v1(3, 2, rng=0).parameters(), lr=0.1).zero_grad(set_to_none=2),
         npattn.ConfigError, "set_to_none must be True or False, got 2"),
        ("GPTModel(cfg)", "a misspelt key (was ignored)", lambda: npattn.GPTModel({**CFG, "emb_dimm": 3}),
         npattn.ConfigError, "cfg has unknown key(s) 'emb_dimm'"),
    ]  # fmt: skip
