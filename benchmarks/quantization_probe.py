"""How much dynamic int8 quantization speeds up and changes a model on this CPU.

    python -m benchmarks.quantization_probe --skip lm_head,down_proj
    python -m benchmarks.quantization_probe --fp32            # the reference row

Quantizes the model's linear layers in place (per-channel int8 weights, activations quantized
at run time; layers whose name contains one of ``--skip`` stay fp32), then reports one decode
step's time after a 256-token prompt and, teacher-forced over the first ``--tokens`` tokens of
each text, the top-1 agreement and KL divergence against the fp32 model and the mean negative
log-likelihood of the text under both.  The fp32 log-probabilities are computed once per
model and text and kept in ``--reference`` so that each configuration runs in its own process
(two fp32 copies of a 1.5B model do not fit next to each other on a 24 GB machine).
It prints its figures; the conclusions drawn from them are in docs/evaluation.md, "Faster CPU
decoding".
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a file: the root

from fim.engines.transformers_engine import load_model  # noqa: E402

TEXTS = (("argparse.py", 20000), ("json/decoder.py", 2000))


def _texts(tokenizer, n_tokens: int) -> list[torch.Tensor]:
    import sysconfig

    stdlib = Path(sysconfig.get_paths()["stdlib"])
    out = []
    for name, offset in TEXTS:
        text = (stdlib / name).read_text(encoding="utf-8")[offset:offset + 8 * n_tokens]
        out.append(tokenizer(text, return_tensors="pt").input_ids[:, :n_tokens])
    return out


def _step_ms(model, ids: torch.Tensor, steps: int = 16) -> float:
    out = model(ids[:, :256], use_cache=True, logits_to_keep=1)
    cache, nxt = out.past_key_values, out.logits[:, -1].argmax(-1, keepdim=True)
    t0 = time.perf_counter()
    for _ in range(steps):
        out = model(nxt, past_key_values=cache, use_cache=True)
        cache, nxt = out.past_key_values, out.logits[:, -1].argmax(-1, keepdim=True)
    return (time.perf_counter() - t0) / steps * 1e3


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default="bundled:qwen2.5-coder-1.5b")
    p.add_argument("--skip", default="lm_head", help="comma-separated name parts kept in fp32")
    p.add_argument("--fp32", action="store_true", help="no quantization (the reference row)")
    p.add_argument("--tokens", type=int, default=768)
    p.add_argument("--reference", type=Path, default=Path("/tmp/seam-quant-reference.pt"))
    args = p.parse_args(argv)

    loaded = load_model(args.model, device="cpu", dtype="fp32")
    model, texts = loaded.model, _texts(loaded.tokenizer, args.tokens)
    key = f"{args.model}:{args.tokens}"
    with torch.inference_mode():
        refs = torch.load(args.reference) if args.reference.is_file() else {}
        if key not in refs:
            refs[key] = [torch.log_softmax(model(ids).logits[0], -1) for ids in texts]
            torch.save(refs, args.reference)
        skip = [s for s in args.skip.split(",") if s]
        quant_s = 0.0
        if not args.fp32:
            from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

            qconfig = {name: per_channel_dynamic_qconfig for name, mod in model.named_modules()
                       if isinstance(mod, torch.nn.Linear) and not any(s in name for s in skip)}
            t0 = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # torch.ao.quantization's deprecation notices
                quantize_dynamic(model, qconfig, dtype=torch.qint8, inplace=True)
            quant_s = time.perf_counter() - t0
        rows = []
        for ids, ref in zip(texts, refs[key], strict=True):
            logp = torch.log_softmax(model(ids).logits[0], -1)
            target = ids[0, 1:, None]
            rows.append({
                "top1_agreement": (logp.argmax(-1) == ref.argmax(-1)).float().mean().item(),
                "kl": (ref.exp() * (ref - logp)).sum(-1).mean().item(),
                "nll_fp32": -ref[:-1].gather(1, target).mean().item(),
                "nll": -logp[:-1].gather(1, target).mean().item(),
            })
        report = {"model": args.model, "int8": not args.fp32, "fp32_layers": skip,
                  "quantize_s": round(quant_s, 1), "ms_per_token": _step_ms(model, texts[0]),
                  "texts": dict(zip((t for t, _ in TEXTS), rows, strict=True))}
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
