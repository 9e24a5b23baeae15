"""``npattn.nn``: the module system and the layers, named and laid out like ``torch.nn``.

    functional/     stage forward/backward pairs (the math, written once)
    parameter.py    Parameter (a trainable array and its .grad)
    module.py       Module (and Parameter, re-exported)
    state_dict.py   the state-dict map and the checked load behind Module, IncompatibleKeys
    sequential.py   ModuleList, Sequential
    layers.py       Linear, Dropout
    losses.py       MSELoss, CrossEntropyLoss (and their functional pairs)
    attention.py    the chapter-3 classes: SelfAttention_v1/v2, CausalAttention,
                    MultiHeadAttentionWrapper, MultiHeadAttention
    projection.py   the base of the Linear-projection attention classes (stage 1, mask, dropout)
    transformer.py  the chapter-4 layers: Embedding, LayerNorm, GELU, FeedForward
    gpt.py          the chapter-4 model: TransformerBlock, GPTModel, generate_text_simple
"""

from npattn.nn import functional
from npattn.nn.attention import (
    CausalAttention,
    MultiHeadAttention,
    MultiHeadAttentionWrapper,
    SelfAttention_v1,
    SelfAttention_v2,
)
from npattn.nn.gpt import GPT_CONFIG_124M, GPTModel, TransformerBlock, generate_text_simple
from npattn.nn.layers import Dropout, Linear
from npattn.nn.losses import CrossEntropyLoss, MSELoss
from npattn.nn.module import IncompatibleKeys, Module, Parameter
from npattn.nn.sequential import ModuleList, Sequential
from npattn.nn.transformer import GELU, Embedding, FeedForward, LayerNorm

__all__ = [
    "GELU",
    "GPT_CONFIG_124M",
    "CausalAttention",
    "CrossEntropyLoss",
    "Dropout",
    "Embedding",
    "FeedForward",
    "GPTModel",
    "IncompatibleKeys",
    "LayerNorm",
    "Linear",
    "MSELoss",
    "Module",
    "ModuleList",
    "MultiHeadAttention",
    "MultiHeadAttentionWrapper",
    "Parameter",
    "SelfAttention_v1",
    "SelfAttention_v2",
    "Sequential",
    "TransformerBlock",
    "functional",
    "generate_text_simple",
]
