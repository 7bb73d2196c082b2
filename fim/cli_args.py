"""Argument parsing shared by every ``seam`` subcommand.

Bad input on the command line is one line on stderr and exit code 2, never a usage dump or a
traceback: :class:`OneLineParser` reports argparse's own errors that way, and the type
functions here refuse what would only fail later (a negative time budget, a NaN temperature, a
dtype no backend knows) at parse time, with the option's name in the message. They import
nothing heavy, so ``seam serve`` can use them before torch is loaded.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

from fim.options import (
    DEVICE_HELP,
    DTYPE_CHOICES,
    Dtype,
    canonical_device,
    canonical_dtype,
    canonical_model,
)


class UsageError(Exception):
    """Bad input from the user: printed as one line, exit code 2."""


class OneLineParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are one line: ``PROG: error: ...`` and exit 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def _finite(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, not {text!r}")
    return value


def non_negative_float(text: str) -> float:
    value = _finite(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, not {text}")
    return value


def positive_float(text: str) -> float:
    value = _finite(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be more than 0, not {text}")
    return value


def fraction(text: str) -> float:
    value = _finite(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must lie between 0 and 1, not {text}")
    return value


def dtype(text: str) -> Dtype:
    name = canonical_dtype(text)
    if name is None:
        raise argparse.ArgumentTypeError(
            f"unknown dtype {text!r}; use {', '.join(DTYPE_CHOICES)} (or fp32, bf16, fp16)")
    return name


def device(text: str) -> str:
    name = canonical_device(text)
    if name is None:
        raise argparse.ArgumentTypeError(f"unknown device {text!r}; use {DEVICE_HELP}")
    return name


def model(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError("the model spec is empty")
    return canonical_model(text)


def readable_file(what: str) -> Callable[[str], Path]:
    """A path that must be an existing regular file (``fim.cli_files`` checks it again, on
    the open file, when it is read)."""
    def check(text: str) -> Path:
        path = Path(text)
        if path.is_dir():
            raise argparse.ArgumentTypeError(f"{text} is a directory, not a {what}")
        if not path.exists():
            raise argparse.ArgumentTypeError(f"{text}: no such file")
        if not path.is_file():  # a FIFO or a device: reading it could hang or never end
            raise argparse.ArgumentTypeError(f"{text} is not a regular file, not a {what}")
        return path
    return check


def writable_file(what: str) -> Callable[[str], Path]:
    """A path a file can be written to: its directory exists, and it is not a directory."""
    def check(text: str) -> Path:
        path = Path(text)
        if path.is_dir():
            raise argparse.ArgumentTypeError(f"{text} is a directory, not a {what}")
        parent = path.parent
        if not parent.is_dir():
            raise argparse.ArgumentTypeError(
                f"cannot write {text}: the directory {parent} does not exist")
        return path
    return check


def fail(prog: str, message: str) -> int:
    """Print a one-line error for ``prog``; return exit code 2."""
    print(f"{prog}: error: {message}", file=sys.stderr)
    return 2
