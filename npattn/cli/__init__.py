"""``npattn.cli``: the ``npattn`` command.

    main.py     the parser and the subcommands: demo, book, train, trace, gradcheck, check
    check.py    ``npattn check``: the user's code in a child process, with a timeout
    demo.py     ``npattn demo``: the main job, a model learning where to attend
    trace.py    ``npattn trace``: predict, trace, check the shapes and every row
    streams.py  standard output and error when they fail: a full disk, a closed pipe, a closed stream
"""

from npattn.cli.main import build_parser, main, run_book_example

__all__ = ["build_parser", "main", "run_book_example"]
