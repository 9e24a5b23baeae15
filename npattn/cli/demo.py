"""``npattn demo``: watch training adjust W_query, W_key and W_value, without PyTorch.

SelfAttention_v1 learns the selective-copy task (``npattn.tasks.SelectiveCopy``) with Adam; the
demo prints the starting weights, a progress line at intervals (step, loss, how far each weight
matrix has moved from its start), the final weights, and one row of attention weights before and
after training. ``--plot FILE.png`` also draws the loss curve and the attention heatmaps.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TextIO

import numpy as np

from npattn.cli.streams import tell
from npattn.errors import ConfigError
from npattn.optim import Adam
from npattn.train.figures import check_plot_target, save_figure
from npattn.train.loop import History, fit, progress_header, progress_line
from npattn.train.saveguard import SaveGuard
from npattn.train.tasks import SelectiveCopy, attention_weights

__all__ = ["DEMO_LR", "DEMO_STEPS", "format_matrix", "run_demo"]

DEMO_STEPS = 300
DEMO_LR = 0.05
LOG_EVERY = 30
WEIGHTS = ("W_query", "W_key", "W_value")


def format_matrix(a: np.ndarray, row_names: Sequence[str] | None = None, digits: int = 4) -> str:
    """One line per row, ``name [ 0.1234, -0.5678]``, two spaces of indent."""
    lines = []
    for i, row in enumerate(np.atleast_2d(a)):
        name = f"{row_names[i]:<8} " if row_names else ""
        lines.append("  " + name + "[" + ", ".join(f"{v: .{digits}f}" for v in row) + "]")
    return "\n".join(lines)


def _format_weights(model: Any, row_names: Sequence[str]) -> str:
    """W_query, W_key and W_value side by side, one row per input feature."""
    blocks = [format_matrix(getattr(model, name).data, digits=2).splitlines() for name in WEIGHTS]
    width = len(blocks[0][0])
    lines = [("          " + "".join(f"{name:<{width + 2}}" for name in WEIGHTS)).rstrip()]
    for i, row_name in enumerate(row_names):
        lines.append(f"{row_name:<8}" + "".join(f"{block[i]:<{width + 2}}" for block in blocks).rstrip())
    return "\n".join(lines)


def _attention_row(weights: np.ndarray, marked: int) -> str:
    return "[" + ", ".join(f"{w:.3f}" + ("*" if j == marked else " ") for j, w in enumerate(weights)) + "]"


def _example_sequence(task: SelectiveCopy) -> tuple[np.ndarray, int, int]:
    """A held-out sequence whose marked token is neither the first nor the last: (x (n, d_in), class, marked)."""
    for i in range(100):
        x, target, marked = task.sample_with_marks(np.random.default_rng([task.seed, 2, i]), 1)
        if 0 < marked[0] < task.n_tokens - 1:
            break
    return x[0], int(target[0, 0]), int(marked[0])


def run_demo(out: TextIO, plot: str | None = None, steps: int = DEMO_STEPS) -> int:
    """Train on selective copy and print what happens; returns the exit code (0 = learned it)."""
    if plot is not None:
        try:
            check_plot_target(plot)
            guard = SaveGuard(plot, "plot")  # what the path holds now is what the plot may replace
        except ConfigError as err:
            tell(f"npattn demo: error: {err}")
            return 2
    task = SelectiveCopy(seed=123)
    k = task.n_classes
    model = task.make_model()
    optimizer = Adam(model.parameters(), lr=DEMO_LR)
    row_names = [f"class {c}" for c in range(k)] + ["marker", "const"]
    x_show, target_show, marked = _example_sequence(task)
    tokens = [f"{int(np.argmax(row[:k]))}{'*' if j == marked else ''}" for j, row in enumerate(x_show)]
    before = task.evaluate(model)
    attn_before = attention_weights(model, x_show)

    print(
        "npattn demo: SelfAttention_v1 learns selective copy, trained by hand-derived backprop (no PyTorch)", file=out
    )
    print(
        f"task: {task.n_tokens} tokens per sequence, each of one of {k} classes; one token is marked (*);\n"
        f"      every position must output the class of the marked token.\n"
        f"      token features: [one-hot class ({k}) | marker | 1] -> d_in = {task.d_in}; "
        f"the {task.d_out} outputs are class logits",
        file=out,
    )
    print(
        f"model: SelfAttention_v1(d_in={task.d_in}, d_out={task.d_out}), weights drawn like "
        f"torch.manual_seed({task.seed}); torch.rand({task.d_in}, {task.d_out}) x3 (float64)",
        file=out,
    )
    print(f"training: Adam(lr={DEMO_LR}), {steps} steps of {task.batch_size} sequences, cross-entropy loss", file=out)
    print("\nstarting weights (rows: input features)", file=out)
    print(_format_weights(model, row_names), file=out)

    print("\n" + progress_header(WEIGHTS), file=out)
    x0, t0 = task.batch(0)
    print(progress_line(0, task.criterion(model(x0), t0), History.begin(model)), file=out)

    def on_log(step: int, loss: float, history: History) -> None:
        print(progress_line(step, loss, history), file=out)

    history = fit(model, optimizer, task.criterion, task.batch, steps, log_every=LOG_EVERY, on_log=on_log)
    after = task.evaluate(model)
    attn_after = attention_weights(model, x_show)

    print("\nfinal weights", file=out)
    print(_format_weights(model, row_names), file=out)
    print(
        f"\none sequence, token classes: {' '.join(tokens)}   (marked token: position {marked}, class {target_show})",
        file=out,
    )
    query = 0  # a position other than the marked one
    print(f"attention weights of position {query} over the {task.n_tokens} tokens:", file=out)
    print(f"  before  {_attention_row(attn_before[query], marked)}", file=out)
    print(f"  after   {_attention_row(attn_after[query], marked)}", file=out)
    print("\non 1000 held-out sequences       before    after", file=out)
    print(f"  loss                          {before['loss']:7.4f}  {after['loss']:7.4f}", file=out)
    print(f"  accuracy                      {before['accuracy']:7.1%}  {after['accuracy']:7.1%}", file=out)
    print(
        f"  attention on the marked token {before['attention_on_marked']:7.3f}  {after['attention_on_marked']:7.3f}",
        file=out,
    )
    if plot is not None:
        _plot(plot, guard, history, attn_before, attn_after, tokens)
        print(f"\nwrote {plot}", file=out)
    return 0 if after["accuracy"] > 0.99 else 1


def _plot(
    path: str, guard: SaveGuard, history: History, attn_before: np.ndarray, attn_after: np.ndarray, tokens: list[str]
) -> None:
    """Loss curve and the before/after attention heatmaps of the shown sequence."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(13, 4))
    axes[0].semilogy(np.arange(len(history.loss)), history.loss)
    axes[0].set(title="training loss", xlabel="step", ylabel="cross-entropy")
    for ax, weights, title in ((axes[1], attn_before, "before"), (axes[2], attn_after, "after")):
        image = ax.imshow(weights, vmin=0, vmax=1, cmap="viridis")
        ax.set(title=f"attention weights, {title}", xlabel="key token", ylabel="query token")
        ax.set_xticks(range(len(tokens)), tokens)
        ax.set_yticks(range(len(tokens)), tokens)
    fig.colorbar(image, ax=axes[1:], shrink=0.8)
    save_figure(fig, path, guard, dpi=100, bbox_inches="tight")
    plt.close(fig)
