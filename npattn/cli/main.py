"""The ``npattn`` command line. ``npattn demo`` runs the main job; ``npattn --help`` lists the rest."""

from __future__ import annotations

import argparse
import re
import signal
import sys
from collections.abc import Sequence
from typing import Any, ClassVar, NoReturn, TextIO

from npattn import _interrupts
from npattn.book import BOOK_TOKENS, book_inputs
from npattn.cli.argtypes import COUNT, SEED, decimal, integer, whole
from npattn.cli.check import DEFAULT_TIMEOUT, run_check_isolated
from npattn.cli.demo import format_matrix, run_demo
from npattn.cli.streams import RUNS, OutputRefused, Stdout, discard, hold_closed_descriptors, tell
from npattn.cli.trace import TRACE_CLASSES, run_trace
from npattn.debug.stagecheck import run_gradcheck
from npattn.debug.trace import trace
from npattn.errors import CheckpointError, ConfigError, NpattnError
from npattn.gradcheck import gradcheck
from npattn.nn.attention import SelfAttention_v1
from npattn.train.atomic import check_source, check_target
from npattn.train.command import run_train_command


def run_book_example(out: TextIO) -> int:
    """The chapter-3 example: SelfAttention_v1(3, 2) with seed 123 on the six-token input."""
    x = book_inputs()
    model = SelfAttention_v1(3, 2, rng=123)
    recorded = trace(model, x)
    context_vec = recorded.output
    print("SelfAttention_v1(d_in=3, d_out=2), weights drawn like torch.manual_seed(123); torch.rand(3, 2) x3", file=out)
    print('input: "Your journey starts with one step", 6 tokens x d_in=3\n', file=out)
    print(f"{'stage':<14} {'shape':<8}", file=out)
    for stage in recorded:
        print(f"{stage.qualname:<14} {stage.shape!s:<8}", file=out)
    print("\ncontext_vec (the book prints the same digits):", file=out)
    print(format_matrix(context_vec, BOOK_TOKENS), file=out)
    report = gradcheck(model, x, raise_exception=False)
    print("\ngradient check (float64, central differences, random upstream gradient):", file=out)
    print(report, file=out)
    return 0 if report else 1


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors: ``npattn train: error: ... (see npattn train --help)``, exit 2."""

    refused: ClassVar[list[str]] = []  # why the OS refused --help's text (argparse drops such errors)
    argv: ClassVar[list[str]] = []  # the arguments being parsed, for error()'s hints

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # no abbreviations: "--step 3" after "--steps 2" would be one more --steps, the last kept
        super().__init__(*args, **{**kwargs, "allow_abbrev": False})

    def error(self, message: str) -> NoReturn:
        needs = re.fullmatch(r"argument (--[-a-z0-9]+)(?:/[^:]*)?: expected one argument", message)
        option = needs.group(1) if needs else ""
        given = _Parser.argv
        at = given.index(option) if option in given else -1
        value = given[at + 1] if 0 <= at < len(given) - 1 else ""
        if value.startswith("-") and not _OPTION.fullmatch(value):  # "--save -x.npz": taken for an option
            message += f" (a value that starts with '-' is given as {option}=VALUE)"
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")

    def parse_args(self, args: Any = None, namespace: Any = None) -> Any:
        """Unrecognized arguments are reported by the command they were given to (``npattn train:
        error: unrecognized arguments: --bogus (see npattn train --help)``), not by ``npattn``."""
        _Parser.argv = list(sys.argv[1:] if args is None else args)  # for error(): what was given
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            commands = [a for a in self._actions if isinstance(a, argparse._SubParsersAction)]
            command = str(getattr(parsed, "command", None))
            given = list(sys.argv[1:] if args is None else args)
            ahead = given[: given.index(command)] if command in given else given  # given to npattn itself
            parser = commands[0].choices.get(command, self) if commands and extras[0] not in ahead else self
            parser.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed

    def print_help(self, file: Any = None) -> None:
        if file is None and sys.stdout is None:  # `npattn --help >&-`: nowhere to print the help
            _Parser.refused.append("it is closed")
            return
        super().print_help(file)

    def _print_message(self, message: str, file: Any = None) -> None:
        file = file or sys.stderr
        if not message or file is None:
            return
        try:
            file.write(message)
            file.flush()
        except BrokenPipeError:  # `npattn --help | head -1`: the reader has what it wanted
            discard(file)
        except OSError as exc:
            discard(file)
            _Parser.refused.append(exc.strerror or str(exc))


SIZE_DEFAULTS = {"tokens": 6, "d_in": 3, "d_out": 2, "seed": 123}


def _add_sizes(cmd: argparse.ArgumentParser, limit: int, why: str) -> None:
    """The size options; their defaults (``SIZE_DEFAULTS``) are filled in by ``_sizes``, so that
    ``trace --book`` can tell a given option from a default one."""
    size, width = integer(1, limit, why), integer(1, limit, "")
    cmd.add_argument("--tokens", type=size, help=f"number of tokens n (default 6, at most {limit})")
    cmd.add_argument("--d-in", type=width, help=f"input dimension (default 3, at most {limit})")
    cmd.add_argument("--d-out", type=width, help=f"output dimension (default 2, at most {limit})")
    cmd.add_argument("--seed", type=SEED, help="seed of the weights and the input (default 123)")


def _sizes(args: argparse.Namespace) -> dict[str, int]:
    """The size options, defaults filled in."""
    return {k: v if (v := getattr(args, k)) is not None else default for k, default in SIZE_DEFAULTS.items()}


def _add_lm_options(group: argparse._ArgumentGroup) -> None:
    """The options of ``npattn train --task lm``; every default is None, so that the run's own
    defaults apply and a resumed run can tell what was given."""
    add = group.add_argument
    add("--text", metavar="FILE", help="UTF-8 text to train on (default: the standard library's pydoc_data.topics)")
    add("--tokenizer", choices=["char", "bpe", "gpt2"], help="default: bpe (trained on the text); gpt2 needs tiktoken")
    add("--vocab-size", type=whole, help="vocabulary of the bpe tokenizer (default: 1024)")
    add("--context-length", type=whole, help="tokens per window, the GPT's context_length (default: 128)")
    add("--emb-dim", type=whole, help="embedding size (default: 128)")
    add("--n-heads", type=whole, help="attention heads (default: 4)")
    add("--n-layers", type=whole, help="transformer blocks (default: 4)")
    add("--drop-rate", type=decimal, help="dropout rate (default: 0.1, the book's)")
    add("--qkv-bias", action="store_const", const=True, help="bias in the query/key/value projections")
    add("--dtype", choices=["float32", "float64"], help="default: float32")
    add("--batch-size", type=whole, help="windows per batch (default: 8)")
    add("--stride", type=whole, help="tokens between window starts (default: the context length)")
    add("--weight-decay", type=decimal, help="AdamW's weight decay (default: 0.1, the book's)")
    add("--epochs", type=whole, help="passes over the training text (instead of --steps)")
    add("--eval-every", type=whole, help="evaluate train and validation loss every N steps (default: 50)")
    add("--eval-iter", type=whole, help="batches per evaluation (default: 5)")
    add("--prompt", help="start of the sample generated after each epoch (default: 'The')")
    add("--sample-tokens", type=whole, help="tokens generated per sample (default: 50)")
    add("--temperature", type=decimal, help="sampling temperature of the samples (default: 0, greedy)")
    add("--top-k", type=whole, help="sample among the k most likely tokens only")
    add("--plot", metavar="FILE.png", help="draw the loss curves (needs matplotlib)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="npattn", description="Self-attention with hand-derived backprop in NumPy.")
    sub = parser.add_subparsers(dest="command")
    demo = sub.add_parser("demo", help="the main job: watch training adjust W_query, W_key, W_value (selective copy)")
    demo.add_argument(
        "--plot", metavar="FILE.png", help="also draw the loss curve and attention heatmaps (needs matplotlib)"
    )
    sub.add_parser("book", help="the book's chapter-3 example: stage shapes, context vectors, gradient check")
    train = sub.add_parser(
        "train", help="train SelfAttention_v1 on a task, or a GPT on text (--task lm); --save/--resume checkpoints"
    )
    train.add_argument(
        "--task", choices=["selective-copy", "teacher-student", "lm"], default=None, help="default: selective-copy"
    )
    train.add_argument("--optimizer", choices=["sgd", "adam", "adamw"], default=None, help="default: adam (lm: adamw)")
    train.add_argument("--lr", type=decimal, default=None, help="learning rate (default: 0.05; lm: 0.0004)")
    train.add_argument(
        "--steps", type=COUNT, default=None, help="total number of steps (default: 300; lm: one epoch)"
    )
    train.add_argument("--seed", type=SEED, default=None, help="seed of the weights and the data (default: 123)")
    train.add_argument(
        "--log-every",
        type=COUNT,
        default=None,
        help="print a progress line every N steps (default: 30, or on --resume the run's own; 0: never)",
    )
    train.add_argument("--save", metavar="FILE", help="write a checkpoint (.npz) here (atomically)")
    train.add_argument(
        "--save-every", type=COUNT, default=0, help="checkpoint every N steps (default: only at the end)"
    )
    train.add_argument("--resume", metavar="FILE", help="continue the run stored in this checkpoint up to --steps")
    _add_lm_options(train.add_argument_group("--task lm: a GPT trained on text (the book's chapter 5)"))
    trace_cmd = sub.add_parser(
        "trace", help="predicted and actual shape of every stage of SelfAttention_v1 (or --class)"
    )
    _add_sizes(trace_cmd, 4096, " (trace keeps every n x n stage)")
    trace_cmd.add_argument(
        "--book",
        action="store_true",
        help="the book's input and seeds (123; 789 for --class v2): 6 tokens, d_in=3, d_out=2 "
        "(not with --tokens, --d-in, --d-out, --seed or --heads)",
    )
    trace_cmd.add_argument("--values", action="store_true", help="also print every stage's array")
    trace_cmd.add_argument(
        "--class",
        dest="attention",
        choices=list(TRACE_CLASSES),
        help="trace this chapter-3 class on a batch of two (with --book: the book's batch and seeds, "
        "789 for v2, 123 for the others; dropout 0.0, context_length = tokens)",
    )
    trace_cmd.add_argument(
        "--heads",
        type=integer(1, 64, " (each head is traced and printed)"),
        default=None,
        help="num_heads of --class wrapper and mha (default 2, at most 64)",
    )
    grad_cmd = sub.add_parser("gradcheck", help="finite-difference check of every stage pair and parameter")
    _add_sizes(grad_cmd, 64, " (every element is checked by finite differences: larger sizes take minutes)")
    check_cmd = sub.add_parser(
        "check",
        help="check your own attention and its backward: FILE.py:NAME (a class, a function, "
        "or a pair NAME_forward/NAME_backward)",
    )
    check_cmd.add_argument("spec", metavar="FILE.py:NAME")
    check_cmd.add_argument(
        "--timeout",
        default=DEFAULT_TIMEOUT,
        metavar="SECONDS",
        help=f"stop your code after this many seconds (default {DEFAULT_TIMEOUT:g}); it runs in a child process",
    )
    return parser


def _check_checkpoint_paths(args: argparse.Namespace) -> None:
    """``--save`` names a file that can be written (not empty, not a directory or a device such as
    /dev/null), ``--resume`` an existing regular file: refused before anything else, naming the option.

    Raises:
        CheckpointError: ``--save: ...`` or ``--resume: ...`` and the reason.
    """
    for option, check in (("--save", check_target), ("--resume", check_source)):
        path = getattr(args, option[2:])
        if path is not None:
            try:
                check(path)
            except CheckpointError as exc:
                raise CheckpointError(f"{option}: {exc}") from None


def _dispatch(args: argparse.Namespace) -> int:
    if args.command in (None, "demo"):
        return run_demo(sys.stdout, plot=getattr(args, "plot", None))
    if args.command == "book":
        return run_book_example(sys.stdout)
    if args.command == "train":
        _check_checkpoint_paths(args)
        return run_train_command(args, sys.stdout)
    if args.command == "trace":
        if args.book:
            given = [f"--{k.replace('_', '-')}" for k in (*SIZE_DEFAULTS, "heads") if getattr(args, k) is not None]
            if given:
                raise ConfigError(
                    f"{', '.join(given)}: --book uses the book's input, sizes and seeds; drop --book to set them"
                )
        if args.heads is not None and args.attention not in ("wrapper", "mha"):
            refused = f"--class {args.attention}" if args.attention else "the default --class v1"
            raise ConfigError(f"--heads applies to --class wrapper or mha, not to {refused}")
        sizes = _sizes(args)
        return run_trace(
            sizes["tokens"],
            sizes["d_in"],
            sizes["d_out"],
            seed=sizes["seed"],
            book=args.book,
            values=args.values,
            attention=args.attention,
            num_heads=2 if args.heads is None else args.heads,
        )
    if args.command == "gradcheck":
        sizes = _sizes(args)
        return run_gradcheck(sizes["tokens"], sizes["d_in"], sizes["d_out"], seed=sizes["seed"])
    if args.command == "check":
        return run_check_isolated(args.spec, timeout=args.timeout)
    raise NpattnError(f"unknown command {args.command}")


_OPTION = re.compile(r"--[A-Za-z][-A-Za-z0-9_]*")


def _repeated_option(argv: Sequence[str]) -> str | None:
    """The first long option given twice (argparse keeps the last: ``--save a --save b`` would
    write only b), or None. Arguments after ``--`` are not options."""
    seen: set[str] = set()
    for arg in argv:
        if arg == "--":
            break
        option = arg.split("=", 1)[0]
        if _OPTION.fullmatch(option):  # "-- hi", a value with a space, is no option (argparse agrees)
            if option in seen:
                return option
            seen.add(option)
    return None


def one_line(exc: BaseException) -> str:
    """The message on one line: load_state_dict's list of problems is joined with "; "."""
    message = ""
    for line in (part.strip() for part in str(exc).splitlines()):
        if line:
            message += line if not message else (" " if message.endswith(":") else "; ") + line
    return message


def _help_flushed() -> int:
    """The exit code after ``--help`` was printed: 0 once it reached standard output (or its reader
    went away), 2 with one line on standard error when the OS refused it (``> /dev/full``)."""
    if _Parser.refused:
        tell(f"npattn: error: cannot write to standard output: {_Parser.refused.pop()}")
        _Parser.refused.clear()
        return 2
    return 0


def entry() -> int:
    """The ``npattn`` script and ``python -m npattn``: ``main()``, where the first Ctrl-C interrupts
    and later presses are ignored, so the first one is reported whole (a second press inside the
    report printed a traceback, or replaced "interrupted at step N; the last checkpoint ..." by a
    bare "interrupted"). A press anywhere before the exit is the command's one line and 130: while
    the parser is built or as ``main`` returns (tracebacks), or where Python drops the exception (a
    ``__del__``: a traceback, then exit 0). Once ``main`` has returned, SIGINT is ignored until the
    exit: Python's shutdown gives Ctrl-C back to the OS, and a press there ended the process by the
    signal (-2) with nothing said, its work done."""
    dropped = sys.unraisablehook
    sys.unraisablehook = lambda unraisable: _unless_interrupt(unraisable, dropped)
    try:
        try:
            try:
                signal.signal(signal.SIGINT, _first_interrupt_only)
            except (ValueError, OSError):  # not the main thread, or no signals here: Python's default stays
                pass
            code = main()
        finally:
            _ignore_interrupts()
    except KeyboardInterrupt:  # pressed outside main's own report (as the parser was built, or main returned)
        code = -1
    if code == -1 or (_interrupts.pressed and code != 130):  # or a press whose KeyboardInterrupt Python dropped
        tell(f"npattn {_interrupts.command_of(sys.argv)}: interrupted")
        return 130
    return code


def _first_interrupt_only(signum: int, frame: Any) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the presses after this one wait for nothing
    _interrupts.press()  # should Python lose the exception, the training loop raises it at its next step
    raise KeyboardInterrupt


def _ignore_interrupts() -> None:
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    except (ValueError, OSError):
        pass


def _unless_interrupt(unraisable: Any, hook: Any) -> None:
    """``sys.unraisablehook`` of the command line: a KeyboardInterrupt Python drops (raised in a
    ``__del__``) is the recorded press ``entry`` reports, not a traceback; the rest go to ``hook``."""
    if isinstance(unraisable.exc_value, KeyboardInterrupt) and _interrupts.pressed:
        return
    hook(unraisable)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``npattn`` console script; returns the exit code (2 for a usage error, 130
    after Ctrl-C: "npattn COMMAND: interrupted" on stderr, no traceback)."""
    hold_closed_descriptors()
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # --help (0) or a usage error (2), already printed on one line
        code = exc.code if isinstance(exc.code, int) else 2
        return _help_flushed() if code == 0 else code
    name = f"npattn {args.command or 'demo'}"
    repeated = _repeated_option(sys.argv[1:] if argv is None else argv)
    if repeated:
        tell(f"{name}: error: {repeated} is given more than once; give it once (see {name} --help)")
        return 2
    stdout = sys.stdout
    if stdout is None and (args.command or "demo") not in RUNS:
        tell(f"{name}: error: standard output is closed, nothing can be printed (redirect it to a file or /dev/null)")
        return 2
    sys.stdout = Stdout(stdout, keep_going=(args.command or "demo") in RUNS)
    try:
        code = _dispatch(args)
        sys.stdout.flush()  # what is still buffered reaches the file here, where a refusal is reported
        refused = getattr(sys.stdout, "refused", "")
        if refused:  # a run whose output the OS refused mid-run went on without it, to its end
            tell(f"{name}: error: cannot write to standard output: {refused}; the run went on without printing "
                 "and ended as it would have (its checkpoints written as asked)")  # fmt: skip
            return 2
        return code
    except OutputRefused as exc:
        sys.stdout = stdout
        discard(stdout)
        tell(f"{name}: error: cannot write to standard output: {exc}")
        return 2
    except NpattnError as exc:
        tell(f"{name}: error: {one_line(exc)}")
        return 2
    except BrokenPipeError:  # e.g. `npattn trace --book | head`
        discard(stdout)
        return 0
    except KeyboardInterrupt as exc:  # Ctrl-C: training says how far it got and what its checkpoint holds
        tell(f"{name}: {str(exc) or 'interrupted'}")
        return 130
    finally:
        sys.stdout = stdout
