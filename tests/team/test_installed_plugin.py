"""The class Seam registers in vLLM's plugin group (``fim.vllm.plugin``): it stands aside when
``--logits-processors`` names Seam's processor (or a subclass) too, so a row is constrained
once; otherwise it is Seam's processor.  (Loaded by a real plain server with no flag:
test_plain_vllm_serve.py.)"""

from __future__ import annotations

import tomllib
from types import SimpleNamespace

import pytest
import torch

from tests.support.team import REPO, need_vllm

need_vllm()

from fim.vllm.plugin import InstalledSeamLogitsProcessor, named_by_flag  # noqa: E402
from fim.vllm.processor import SeamLogitsProcessor  # noqa: E402
from lsp_server.team_server import INSTALLED_PLUGIN, PLUGIN  # noqa: E402


def _config(*named) -> SimpleNamespace:
    return SimpleNamespace(model_config=SimpleNamespace(logits_processors=list(named)))


def test_pyproject_registers_the_installed_class():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["entry-points"]["vllm.logits_processors"] == {"seam": INSTALLED_PLUGIN}
    assert issubclass(InstalledSeamLogitsProcessor, SeamLogitsProcessor)


@pytest.mark.parametrize("named", [PLUGIN, "benchmarks.vllm_step_timer:TimedSeamLogitsProcessor",
                                   SeamLogitsProcessor])
def test_it_stands_aside_when_seam_is_named_by_flag(named):
    assert named_by_flag(_config(named))
    proc = InstalledSeamLogitsProcessor(_config(named), "cpu", False)  # V1's arguments
    logits = torch.randn(2, 50)
    before = logits.clone()
    proc.update_state(None)
    assert proc.apply(logits) is logits and torch.equal(logits, before)
    assert proc.add_request(0, None) is False and proc.is_argmax_invariant()


@pytest.mark.parametrize("named", [[], ["vllm.v1.sample.logits_processor.builtin:"
                                        "MinPLogitsProcessor"], ["no.such.module:Thing"],
                                   [INSTALLED_PLUGIN]])
def test_other_processors_do_not_make_it_stand_aside(named):
    assert not named_by_flag(_config(*named))
