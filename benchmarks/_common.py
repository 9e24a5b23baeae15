"""Shared pieces of the benchmark scripts: interleaved timing, medians, thread report, tables.

Every script measures all of its cases in one run, round-robin (case A, B, C, A, B, C, ...), so
that a slow spell of a shared machine hits every case alike; it reports medians and ratios.
"""

from __future__ import annotations

import argparse
import ctypes
import glob
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run from a checkout without installing
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

import npattn  # noqa: E402
from npattn.kernels.blocks import num_workers  # noqa: E402


def parser(doc: str | None) -> argparse.ArgumentParser:
    """The options every script has: --json PATH and --no-torch."""
    p = argparse.ArgumentParser(description=(doc or "").splitlines()[0])
    p.add_argument("--json", metavar="PATH", help="also write every number to PATH")
    p.add_argument("--no-torch", action="store_true", help="skip PyTorch even when installed")
    return p


def start(args: argparse.Namespace) -> tuple[Any, dict[str, Any]]:
    """Import torch (unless --no-torch), print the environment; returns (torch or None, environment)."""
    torch = import_torch(not args.no_torch)
    env = environment(torch)
    print_environment(env)
    return torch, env


def import_torch(enabled: bool = True) -> Any:
    """torch with as many intra-op threads as NumPy's BLAS uses (OPENBLAS_NUM_THREADS, else one
    per core); None when not installed."""
    if not enabled:
        return None
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(blas_info().get("threads") or num_workers())
    return torch


def blas_info() -> dict[str, Any]:
    """NumPy's BLAS: name, version, config and thread count (asked from the library itself)."""
    info: dict[str, Any] = {}
    try:
        deps = np.show_config(mode="dicts")["Build Dependencies"]["blas"]  # type: ignore[index]
        info.update(name=deps.get("name"), version=deps.get("version"))
    except Exception:  # pragma: no cover - old NumPy
        pass
    libs = glob.glob(str(Path(np.__file__).parent.parent / "numpy.libs" / "*openblas*"))
    for path in libs:
        lib = ctypes.CDLL(path)
        for suffix in ("64_", ""):
            getter = getattr(lib, f"scipy_openblas_get_num_threads{suffix}", None)
            config = getattr(lib, f"scipy_openblas_get_config{suffix}", None)
            if getter is not None:
                info["threads"] = int(getter())
            if config is not None:
                config.restype = ctypes.c_char_p
                info["config"] = config().decode()
    return info


def threadpool_info() -> list[dict[str, Any]] | None:
    """threadpoolctl's view of the loaded BLAS and OpenMP libraries (None without threadpoolctl)."""
    try:
        from threadpoolctl import threadpool_info as info
    except ImportError:
        return None
    keys = ("user_api", "internal_api", "version", "num_threads", "threading_layer", "architecture", "prefix")
    return [{k: lib.get(k) for k in keys if lib.get(k) is not None} for lib in info()]


def environment(torch: Any) -> dict[str, Any]:
    env = {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "npattn": npattn.__version__,
        "cores": num_workers(),
        "npattn_pool_threads": num_workers(),
        "blas": blas_info(),
        "thread_env": {k: v for k, v in os.environ.items() if k.endswith("NUM_THREADS") or k.startswith("OPENBLAS_")},
        "threadpoolctl": threadpool_info(),
        "torch": None,
        "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
    }
    if torch is not None:
        env["torch"] = {"version": torch.__version__, "threads": torch.get_num_threads()}
    return env


def print_environment(env: dict[str, Any]) -> None:
    blas = env["blas"]
    torch = env["torch"]
    print(f"# {env['command']}  ({env['date_utc']} UTC)")
    print(
        f"# cores {env['cores']}; numpy {env['numpy']} with {blas.get('name')} {blas.get('version')}, "
        f"BLAS threads {blas.get('threads', '?')}; npattn pool threads {env['npattn_pool_threads']}; "
        + (f"torch {torch['version']}, intra-op threads {torch['threads']}" if torch else "torch not installed")
    )
    print(f"# thread environment variables: {env['thread_env'] or 'none set'}")
    libs = env["threadpoolctl"]
    if libs is None:
        print("# threadpoolctl not installed: the tiled path runs its slabs one after another")
    else:
        fields = ("internal_api", "version", "architecture")
        names = [" ".join(str(lib[k]) for k in fields if k in lib) for lib in libs]
        print("# threadpoolctl: " + "; ".join(f"{n}, {lib.get('num_threads')} threads" for n, lib in zip(names, libs)))


def calibrate(fn: Callable[[], Any], target: float) -> int:
    """How many calls make one timed sample of at least ``target`` seconds (min 1)."""
    start = time.perf_counter()
    fn()
    once = time.perf_counter() - start
    return max(1, int(target / max(once, 1e-7)))


def interleaved(
    cases: dict[str, Callable[[], Any]], repeats: int, target: float, pause: float = 0.0
) -> dict[str, float]:
    """Median seconds per call of each case, sampled round-robin ``repeats`` times.

    ``pause`` seconds of sleep (untimed) before each sample let the previous case's idle threads
    stop spinning (OpenBLAS and OpenMP workers spin for a while after a call and would otherwise
    take cores from the next case).
    """
    numbers = {name: calibrate(fn, target) for name, fn in cases.items()}
    samples: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(repeats):
        for name, fn in cases.items():
            time.sleep(pause)
            k = numbers[name]
            start = time.perf_counter()
            for _ in range(k):
                fn()
            samples[name].append((time.perf_counter() - start) / k)
    return {name: statistics.median(s) for name, s in samples.items()}


def ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b == 0 else a / b


def table(rows: list[dict[str, Any]], columns: list[tuple[str, str, str]]) -> str:
    """Markdown table; columns are (key, header, format); None prints as '-'."""

    def cell(value: Any, fmt: str) -> str:
        return "-" if value is None else format(value, fmt)

    lines = ["| " + " | ".join(h for _, h, _ in columns) + " |", "|" + "|".join("---" for _ in columns) + "|"]
    for row in rows:
        lines.append("| " + " | ".join(cell(row.get(k), f) for k, _, f in columns) + " |")
    return "\n".join(lines)


def write_json(path: str | None, env: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    if path:
        Path(path).write_text(json.dumps({"environment": env, "results": rows}, indent=2) + "\n")
        print(f"# wrote {path}")
