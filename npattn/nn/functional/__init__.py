"""Stage forward/backward pairs, like ``torch.nn.functional``: every ``*_forward`` returns
``(out, cache)`` and its ``*_backward(d_out, cache)`` sits beside it, quoting the line it inverts.

    attention.py    the chapter-3 stages: project, bias, scores, mask, softmax, dropout, context,
                    and the whole pipeline (attention_forward/backward)
    heads.py        split/merge heads and concat (the multi-head reshapes)
    transformer.py  the chapter-4 stages: layer norm, GELU, embedding, add, token cross-entropy
"""

from npattn.nn.functional.attention import *  # noqa: F403
from npattn.nn.functional.attention import __all__ as _attention_all
from npattn.nn.functional.contract import wrap_stages
from npattn.nn.functional.heads import *  # noqa: F403
from npattn.nn.functional.heads import __all__ as _heads_all
from npattn.nn.functional.transformer import *  # noqa: F403
from npattn.nn.functional.transformer import __all__ as _transformer_all

__all__ = [*_attention_all, *_heads_all, *_transformer_all]

# Every stage's arguments, checked in one place where callers reach it, here (npattn._checks.stage_arrays,
# then contract.py): a torch tensor is taken as its ndarray, as the modules take it; a list, a number or
# None gets a clear DTypeError; scalars, masks, caches and upstream gradients are checked as contract.py
# says. Inside a stage file a pipeline (attention_forward, ...) calls the bare stages: what they get
# was made by the stages before them, from arguments already checked here.
wrap_stages(globals(), __all__)
