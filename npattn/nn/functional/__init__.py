"""Stage forward/backward pairs, like ``torch.nn.functional``: every ``*_forward`` returns
``(out, cache)`` and its ``*_backward(d_out, cache)`` sits beside it, quoting the line it inverts.

    attention.py    the chapter-3 stages: project, bias, scores, mask, softmax, dropout, context,
                    split/merge heads, concat, and the whole pipeline (attention_forward/backward)
    transformer.py  the chapter-4 stages: layer norm, GELU, embedding, add, token cross-entropy
"""

from npattn.nn.functional.attention import *  # noqa: F403
from npattn.nn.functional.attention import __all__ as _attention_all
from npattn.nn.functional.transformer import *  # noqa: F403
from npattn.nn.functional.transformer import __all__ as _transformer_all

__all__ = [*_attention_all, *_transformer_all]
