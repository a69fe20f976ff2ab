"""Greedy decoding with optimum-intel's stateful IRs, one token per call, the KV cache kept in the
model's ReadValue/Assign state.  tests/test_llm.py runs it with irrun and OpenVINO, and
tests/models/export_llm.py with OpenVINO when it writes the fixtures (so: no irrun, no pytest here).

A `step` is any callable from a dict of input arrays to the logits `[batch, tokens, vocab]`; the
caller resets the state before the first step.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Mapping

import numpy as np

Step = Callable[[dict[str, np.ndarray]], np.ndarray]


def openvino_step(xml: Path, config: dict) -> Step:
    """A fresh InferRequest of `xml` compiled for OpenVINO's CPU with `config`, state reset."""
    from ovutil import compile_cpu

    compiled = compile_cpu(xml, config)
    request = compiled.create_infer_request()
    request.reset_state()
    return lambda feeds: request.infer(feeds)[compiled.outputs[0]].copy()


def decoder_feeds(names, ids: np.ndarray, past: int) -> dict[str, np.ndarray]:
    """A causal decoder's inputs for the tokens `ids` [1, n] after `past` cached ones, limited to the
    inputs in `names`: the attention mask covers cache and new tokens, positions continue, and
    beam_idx keeps the one beam where it is."""
    n = ids.shape[1]
    feeds = {"input_ids": ids, "attention_mask": np.ones((1, past + n), np.int64),
             "position_ids": np.arange(past, past + n, dtype=np.int64)[None], "beam_idx": np.zeros(1, np.int32)}
    return {k: v for k, v in feeds.items() if k in names}


def _next(logits: np.ndarray) -> np.ndarray:
    return np.array([[int(logits[0, -1].argmax())]], np.int64)


def decode(step: Step, prompt: Mapping[str, np.ndarray], new_tokens: int) -> tuple[list[int], np.ndarray]:
    """Greedy ids of `new_tokens` steps of a causal decoder from the prefill inputs `prompt`
    (its .npz), and the prefill's logits."""
    feeds, past, ids, first = dict(prompt), 0, [], None
    for _ in range(new_tokens):
        logits = step(feeds)
        first = np.array(logits) if first is None else first
        past += feeds["input_ids"].shape[1]
        token = _next(logits)
        ids.append(int(token[0, 0]))
        feeds = decoder_feeds(prompt.keys(), token, past)
    return ids, first


def decode_seq2seq(encode: Step, step: Step, example: Mapping[str, np.ndarray],
                   new_tokens: int) -> tuple[list[int], np.ndarray]:
    """The same for an encoder-decoder (optimum-intel's T5): `encode` gives the encoder's hidden
    states once; the stateful decoder gets one token per call, starting from `decoder_input_ids`.
    The decoder caches its cross-attention keys and values at the first call."""
    hidden = encode({"input_ids": example["input_ids"], "attention_mask": example["attention_mask"]})
    token, ids, first = example["decoder_input_ids"], [], None
    for _ in range(new_tokens):
        logits = step({"input_ids": token, "encoder_hidden_states": hidden,
                       "encoder_attention_mask": example["attention_mask"], "beam_idx": example["beam_idx"]})
        first = np.array(logits) if first is None else first
        token = _next(logits)
        ids.append(int(token[0, 0]))
    return ids, first
