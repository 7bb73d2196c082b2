"""The cost of building a language at a cursor does not grow with the file (issue 28, finding
5: the first suggestion in a 200,000-line file spent 5.6 s parsing the text outside the
windows before its first token).  What is parsed on the request's thread is bounded; the far
text is judged in chunks on a background thread, and the next language has the true mode."""

from __future__ import annotations

import threading
import time

import pytest

from python_language import FimLanguage, fallback, outside


def functions(n: int) -> str:
    return "".join(f"def f{i}(x):\n    y = x + {i}\n    return y\n\n\n" for i in range(n))


BODY = functions(20_000)


@pytest.fixture
def parsed(monkeypatch) -> list[tuple[str, int]]:
    """(thread name, characters) of every CPython parse of a file."""
    seen: list[tuple[str, int]] = []
    real = fallback.parses

    def counting(text: str, mode: str = "exec") -> bool:
        seen.append((threading.current_thread().name, len(text)))
        return real(text, mode)

    monkeypatch.setattr(fallback, "parses", counting)
    fallback.outside_parses.cache_clear()
    return seen


def _wait_idle() -> None:
    end = time.monotonic() + 120
    while not outside.checker.idle():
        assert time.monotonic() < end, "the background check did not end"
        time.sleep(0.05)


def _language(body_after: str) -> FimLanguage:
    left = BODY + "def g(y):\n    z = y"
    return FimLanguage.for_python(left, "\n    return z\n\n\n" + body_after, scope="statement")


def test_the_request_thread_parses_a_bounded_part_of_a_large_file(parsed) -> None:
    assert len(BODY) > 900_000
    lang = _language(BODY)
    assert lang.mode == "exact"
    here = sum(n for name, n in parsed if name == threading.current_thread().name)
    # Before: both outside parts, 1.9 MB, parsed here.
    assert here <= 2 * outside.NEAR_CHARS
    _wait_idle()
    again = _language(BODY)
    assert again.mode == "exact" and again.reason == ""
    assert sum(n for _, n in parsed) < 3 * len(BODY)  # each chunk parsed once


def test_an_error_far_from_the_cursor_is_found_in_the_background(parsed) -> None:
    broken = BODY[: len(BODY) // 2] + "def broken(:\n    pass\n\n\n" + BODY[len(BODY) // 2:]
    first = _language(broken)
    # The far text is not known yet: exact within the windows, and the reason says so.
    assert first.mode == "exact" and "still being checked" in first.reason
    _wait_idle()
    assert _language(broken).mode == "window"


def test_a_cut_inside_a_string_does_not_make_a_parsing_file_fail(parsed) -> None:
    quoted = '"""\n' + "def not_code(:\n" * 5_000 + '"""\n\n\n'
    text = functions(5_000) + quoted + functions(5_000)
    assert outside.outside_state(text) in (None, True)
    _wait_idle()
    assert outside.outside_state(text) is True


def test_a_statement_too_long_to_parse_is_left_unchecked(parsed) -> None:
    """A 5 MB literal far from the cursor is not parsed (it held the interpreter for seconds
    and every request with it): the mode is exact within the windows, and says why."""
    data = "DATA = [" + "1, " * 400_000 + "]\n"  # 1.2 MB on one line
    left = data + "def g(y):\n    z = y"
    lang = FimLanguage.for_python(left, "\n    return z\n", scope="statement")
    assert lang.mode == "exact"
    _wait_idle()
    again = FimLanguage.for_python(left, "\n    return z\n", scope="statement")
    assert again.mode == "exact" and "too long to check" in again.reason
    assert max((n for _, n in parsed), default=0) <= outside.MAX_PARSE_CHARS
