"""``npattn.nn``: the module system and the layers, named and laid out like ``torch.nn``.

    functional/     stage forward/backward pairs (the math, written once)
    parameter.py    Parameter (a trainable array and its .grad)
    module.py       Module, ModuleList (and Parameter, re-exported)
    sequential.py   Sequential
    layers.py       Linear, Dropout
    losses.py       MSELoss, CrossEntropyLoss (and their functional pairs)
    attention.py    the chapter-3 classes: SelfAttention_v1/v2, CausalAttention,
                    MultiHeadAttentionWrapper, MultiHeadAttention
"""

from npattn.nn import functional
from npattn.nn.attention import (
    CausalAttention,
    MultiHeadAttention,
    MultiHeadAttentionWrapper,
    SelfAttention_v1,
    SelfAttention_v2,
)
from npattn.nn.layers import Dropout, Linear
from npattn.nn.losses import CrossEntropyLoss, MSELoss
from npattn.nn.module import IncompatibleKeys, Module, ModuleList, Parameter
from npattn.nn.sequential import Sequential

__all__ = [
    "CausalAttention",
    "CrossEntropyLoss",
    "Dropout",
    "IncompatibleKeys",
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
    "functional",
]
