"""A built language pickled with its grammar named (``quotient.transfer``) answers every
middle as the language itself does, in this process and in another one whose string hashing
differs; a pickle whose grammar numbers its symbols otherwise is refused."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fim.language_cache import python_language
from fim.options import Scope
from python_language.grammar import python_grammar
from quotient import transfer
from quotient.lr0 import DfaState, automaton

ROOT = Path(__file__).resolve().parents[2]
LEFT = ("import os\n\nclass Walker:\n    def __init__(self, root):\n        self.root = root\n\n"
        "    def files(self):\n        out = []\n        for name in os.listdir(self.root):\n"
        "            if name.endswith('.py'):\n                out.append(")
RIGHT = ")\n        return sorted(out)\n\n\ndef main():\n    print(Walker('.').files())\n"
PROBES = ["name", "os.path.join(self.root, name)", "name)", "name\n", "(name", "[name]",
          "self.root + name", "name if name else None", "1 +", "name)\n        x = (", "'a' 'b'"]
ALPHABET = "ab1(): \n[]'+=.,"


def _verdict(language, text: str) -> tuple[bool, bool]:
    state = language.initial().feed(text)
    return state is not None, state is not None and state.is_complete()


@pytest.fixture(scope="module")
def language():
    return python_language(LEFT, RIGHT, Scope.FREE)


def test_round_trip_names_the_shared_automaton(language, monkeypatch):
    loaded = []
    load = transfer._Unpickler.persistent_load

    def recording(self, pid):
        obj = load(self, pid)
        loaded.append((pid[0], obj))
        return obj

    monkeypatch.setattr(transfer._Unpickler, "persistent_load", recording)
    got = transfer.loads(transfer.dumps(language))
    assert [_verdict(got, p) for p in PROBES] == [_verdict(language, p) for p in PROBES]
    assert _verdict(language, "name") == (True, True) and not _verdict(language, "name))")[0]
    # The base automaton's states came back as this process's own, not as copies.
    base = automaton(python_grammar())
    states = [obj for kind, obj in loaded if kind in ("kernel", "prediction")]
    assert states, "the language's charts hold no state of the base automaton"
    assert all(isinstance(s, DfaState) and s.auto is base and (
        base._kernels.get(s.items) is s or base._predictions.get(s.nts) is s) for s in states)


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet=ALPHABET, min_size=1, max_size=10))
def test_round_trip_answers_as_the_original(language, middle):
    got = transfer.loads(transfer.dumps(language))
    assert _verdict(got, middle) == _verdict(language, middle)


_OTHER = """
import json, sys
sys.path.insert(0, sys.argv[1])
from fim.language_cache import python_language
from fim.options import Scope
from quotient import transfer
lang = transfer.loads(sys.stdin.buffer.read())
own = python_language(*json.loads(sys.argv[2]), Scope.FREE)
probes = json.loads(sys.argv[3])
def verdict(l, t):
    s = l.initial().feed(t)
    return [s is not None, s is not None and s.is_complete()]
print(json.dumps([[verdict(lang, p), verdict(own, p)] for p in probes]))
"""


@pytest.mark.parametrize("seed", ["1", "2"])
def test_another_process_with_other_hashing_reads_it(language, seed):
    """The grammar's numbering must not depend on string hashing: with lark's hash-ordered
    terminals the two processes numbered symbols differently and the receiver misread the
    charts."""
    probes = PROBES + [f"name{c}" for c in ALPHABET]
    env = dict(os.environ, PYTHONHASHSEED=seed)
    out = subprocess.run(
        [sys.executable, "-c", _OTHER, str(ROOT), json.dumps([LEFT, RIGHT]), json.dumps(probes)],
        input=transfer.dumps(language), capture_output=True, env=env, check=True, timeout=300)
    pairs = json.loads(out.stdout)
    assert [got for got, _own in pairs] == [own for _got, own in pairs]
    assert [got for got, _own in pairs] == [list(_verdict(language, p)) for p in probes]


def test_fingerprint_is_the_same_in_every_process():
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from quotient import transfer; "
            "from python_language.grammar import python_grammar; "
            "print(transfer.fingerprint(python_grammar()))")
    prints = {subprocess.run([sys.executable, "-c", code, str(ROOT)], capture_output=True,
                             text=True, check=True, timeout=300,
                             env=dict(os.environ, PYTHONHASHSEED=s)).stdout.strip()
              for s in ("1", "2", "3")}
    assert prints == {transfer.fingerprint(python_grammar())}


def test_a_grammar_numbered_otherwise_is_refused(language):
    data = transfer.dumps(language)
    sign = transfer.fingerprint(python_grammar()).encode()
    assert sign in data
    with pytest.raises(transfer.TransferError, match="numbers its symbols otherwise"):
        transfer.loads(data.replace(sign, b"0" * len(sign)))


def test_an_unregistered_name_is_refused(language, monkeypatch):
    data = transfer.dumps(language)
    monkeypatch.setattr(transfer, "_SHARED", {})
    with pytest.raises(transfer.TransferError, match="does not share"):
        transfer.loads(data)
