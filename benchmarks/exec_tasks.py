"""The execution benchmark's programs: small Python functions, each with the unit tests that
decide whether a filled-in program still works (``benchmarks.exec_holes`` holds out one line
at a time and runs the tests on what the model wrote there).

Written for this repository, so the model has not read them; kept short so that a program
and its tests run in a fraction of a second.  Several holes are the pattern issue 29 found
costly: a ``return False`` just before a ``return True`` one block out, where a right-context
stop taken on one token of agreement leaves bare indentation and a program that parses but
answers wrongly.  The tests see only the program's behaviour; the model never sees them.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Task:
    """A program and the statements that test it (run after it, in the same file)."""

    name: str
    program: str
    tests: str


TASKS = (
    Task("is_prime", '''def is_prime(n):
    if n < 2:
        return False
    for d in range(2, int(n ** 0.5) + 1):
        if n % d == 0:
            return False
    return True
''', '''assert [n for n in range(30) if is_prime(n)] == [2, 3, 5, 7, 11, 13, 17, 19, 23, 29]
assert not is_prime(91) and is_prime(97)
'''),
    Task("is_palindrome", '''def is_palindrome(text):
    letters = [c.lower() for c in text if c.isalnum()]
    i, j = 0, len(letters) - 1
    while i < j:
        if letters[i] != letters[j]:
            return False
        i += 1
        j -= 1
    return True
''', '''assert is_palindrome("A man, a plan, a canal: Panama")
assert is_palindrome("") and is_palindrome("x")
assert not is_palindrome("abca") and not is_palindrome("ab")
'''),
    Task("all_unique", '''def all_unique(items):
    seen = set()
    for item in items:
        if item in seen:
            return False
        seen.add(item)
    return True
''', '''assert all_unique([]) and all_unique([1, 2, 3]) and all_unique("abc")
assert not all_unique([1, 2, 1]) and not all_unique("hello")
'''),
    Task("balanced", '''def balanced(text):
    pairs = {")": "(", "]": "[", "}": "{"}
    stack = []
    for ch in text:
        if ch in "([{":
            stack.append(ch)
        elif ch in pairs:
            if not stack or stack.pop() != pairs[ch]:
                return False
    return not stack
''', '''assert balanced("") and balanced("(a[b]{c})") and balanced("x(y)z")
assert not balanced("(") and not balanced(")(") and not balanced("([)]")
assert not balanced("{[}")
'''),
    Task("is_sorted", '''def is_sorted(values):
    for a, b in zip(values, values[1:]):
        if a > b:
            return False
    return True
''', '''assert is_sorted([]) and is_sorted([1]) and is_sorted([1, 1, 2, 5])
assert not is_sorted([2, 1]) and not is_sorted([1, 3, 2, 4])
'''),
    Task("run_length", '''def run_length(text):
    out = []
    for ch in text:
        if out and out[-1][0] == ch:
            out[-1][1] += 1
        else:
            out.append([ch, 1])
    return "".join(f"{ch}{n}" for ch, n in out)
''', '''assert run_length("") == ""
assert run_length("aaabccdddd") == "a3b1c2d4"
assert run_length("abab") == "a1b1a1b1"
'''),
    Task("word_counts", '''def word_counts(text):
    counts = {}
    for word in text.lower().split():
        word = word.strip(".,!?")
        if word:
            counts[word] = counts.get(word, 0) + 1
    return counts
''', '''assert word_counts("") == {}
assert word_counts("The cat saw the dog. The end!") == {
    "the": 3, "cat": 1, "saw": 1, "dog": 1, "end": 1}
assert word_counts("... hi !") == {"hi": 1}
'''),
    Task("binary_search", '''def binary_search(values, target):
    lo, hi = 0, len(values) - 1
    while lo <= hi:
        mid = (lo + hi) // 2
        if values[mid] == target:
            return mid
        if values[mid] < target:
            lo = mid + 1
        else:
            hi = mid - 1
    return -1
''', '''data = [1, 3, 5, 7, 9, 11]
assert [binary_search(data, x) for x in data] == [0, 1, 2, 3, 4, 5]
assert binary_search(data, 4) == -1 and binary_search([], 1) == -1
assert binary_search(data, 12) == -1 and binary_search(data, 0) == -1
'''),
    Task("flatten", '''def flatten(items):
    out = []
    for item in items:
        if isinstance(item, list):
            out.extend(flatten(item))
        else:
            out.append(item)
    return out
''', '''assert flatten([]) == []
assert flatten([1, [2, [3, [4]], 5], [[6]]]) == [1, 2, 3, 4, 5, 6]
assert flatten(["ab", ["c"]]) == ["ab", "c"]
'''),
    Task("stack", '''class Stack:
    def __init__(self):
        self.items = []

    def push(self, item):
        self.items.append(item)

    def pop(self):
        if not self.items:
            raise IndexError("pop from an empty stack")
        return self.items.pop()

    def is_empty(self):
        return len(self.items) == 0
''', '''s = Stack()
assert s.is_empty()
s.push(1)
s.push(2)
assert not s.is_empty() and s.pop() == 2 and s.pop() == 1 and s.is_empty()
try:
    s.pop()
except IndexError:
    pass
else:
    raise AssertionError("pop from an empty stack must raise")
'''),
    Task("is_anagram", '''def is_anagram(a, b):
    if len(a) != len(b):
        return False
    counts = {}
    for ch in a:
        counts[ch] = counts.get(ch, 0) + 1
    for ch in b:
        if counts.get(ch, 0) == 0:
            return False
        counts[ch] -= 1
    return True
''', '''assert is_anagram("listen", "silent") and is_anagram("", "")
assert not is_anagram("abc", "abd") and not is_anagram("aab", "abb")
assert not is_anagram("ab", "abc")
'''),
    Task("fizzbuzz", '''def fizzbuzz(n):
    if n % 15 == 0:
        return "FizzBuzz"
    if n % 3 == 0:
        return "Fizz"
    if n % 5 == 0:
        return "Buzz"
    return str(n)
''', '''assert [fizzbuzz(n) for n in range(1, 16)] == [
    "1", "2", "Fizz", "4", "Buzz", "Fizz", "7", "8", "Fizz", "Buzz", "11", "Fizz", "13",
    "14", "FizzBuzz"]
'''),
    Task("has_pair_with_sum", '''def has_pair_with_sum(values, total):
    seen = set()
    for v in values:
        if total - v in seen:
            return True
        seen.add(v)
    return False
''', '''assert has_pair_with_sum([1, 4, 6, 9], 10) and has_pair_with_sum([5, 5], 10)
assert not has_pair_with_sum([5], 10) and not has_pair_with_sum([1, 2, 3], 7)
assert not has_pair_with_sum([], 0)
'''),
    Task("is_leap", '''def is_leap(year):
    if year % 400 == 0:
        return True
    if year % 100 == 0:
        return False
    return year % 4 == 0
''', '''assert [y for y in (1900, 1996, 2000, 2023, 2024, 2100) if is_leap(y)] == [1996, 2000, 2024]
'''),
    Task("gcd_lcm", '''def gcd(a, b):
    while b:
        a, b = b, a % b
    return a


def lcm(a, b):
    return a * b // gcd(a, b)
''', '''assert gcd(12, 18) == 6 and gcd(7, 13) == 1 and gcd(0, 5) == 5
assert lcm(4, 6) == 12 and lcm(7, 3) == 21
'''),
    Task("moving_average", '''def moving_average(values, width):
    if width <= 0:
        raise ValueError("width must be positive")
    out = []
    total = 0
    for i, v in enumerate(values):
        total += v
        if i >= width:
            total -= values[i - width]
        if i >= width - 1:
            out.append(total / width)
    return out
''', '''assert moving_average([1, 2, 3, 4, 5], 2) == [1.5, 2.5, 3.5, 4.5]
assert moving_average([2, 4, 6], 3) == [4.0] and moving_average([1], 2) == []
try:
    moving_average([1], 0)
except ValueError:
    pass
else:
    raise AssertionError("width 0 must raise")
'''),
    Task("parse_config", '''def parse_config(text):
    config = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, _, value = line.partition("=")
        config[key.strip()] = value.strip()
    return config
''', '''assert parse_config("") == {}
assert parse_config("# comment\\n a = 1 \\n\\nb=two=2\\n") == {"a": "1", "b": "two=2"}
'''),
    Task("is_subsequence", '''def is_subsequence(short, long):
    i = 0
    for ch in long:
        if i < len(short) and short[i] == ch:
            i += 1
    return i == len(short)
''', '''assert is_subsequence("", "abc") and is_subsequence("ace", "abcde")
assert not is_subsequence("aec", "abcde") and not is_subsequence("abc", "ab")
'''),
    Task("all_positive", '''def all_positive(values):
    for v in values:
        if v <= 0:
            return False
    return True
''', '''assert all_positive([]) and all_positive([1, 2.5, 3])
assert not all_positive([1, 0, 2]) and not all_positive([-1])
'''),
    Task("is_valid_hex", '''def is_valid_hex(text):
    if not text:
        return False
    for ch in text.lower():
        if ch not in "0123456789abcdef":
            return False
    return True
''', '''assert is_valid_hex("0") and is_valid_hex("DeadBeef") and is_valid_hex("09af")
assert not is_valid_hex("") and not is_valid_hex("0x1f") and not is_valid_hex("g")
'''),
    Task("matches_pattern", '''def matches_pattern(word, pattern):
    if len(word) != len(pattern):
        return False
    for w, p in zip(word, pattern):
        if p != "?" and p != w:
            return False
    return True
''', '''assert matches_pattern("cat", "c?t") and matches_pattern("", "")
assert matches_pattern("dog", "???") and not matches_pattern("dog", "d?")
assert not matches_pattern("cat", "c?r") and not matches_pattern("cat", "?at?")
'''),
)
