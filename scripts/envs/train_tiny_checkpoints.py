#!/usr/bin/env python3
"""Train the tiny model briefly on answer-judge's own items and keep a few checkpoints, so that an
evaluation on this machine has something to learn from: scores that rise with the step.

Usage: python train_tiny_checkpoints.py TINY_MODEL_DIR PREPARED_JSONL OUT_DIR [--steps 0,30,80]

Run it with the vLLM venv's interpreter (torch, transformers). PREPARED_JSONL is what gym prepares
for the benchmark (``gym dataset collate``: each row's prompt as the policy receives it); the
model learns, from each prompt rendered with its chat template as vLLM renders it, to answer with
the row's expected ``Judgement: Yes|No``. Teacher forcing on the answer's tokens only, full batch,
a fixed seed: on a CPU, about a minute. OUT_DIR/step-<n> is the model after n steps (step-0 is
the untrained model), each a whole model directory vLLM serves. Nothing is downloaded.
"""

from __future__ import annotations

import argparse
import json
import os

import torch
from make_tiny_model import save_model_dir  # beside this file
from transformers import AutoTokenizer, LlamaForCausalLM


def examples(path: str, tokenizer) -> list[tuple[list[int], list[int]]]:
    """(prompt ids, answer ids) of every row: the prompt as the server renders it, the answer the
    verifier wants, then the end of the turn."""
    out = []
    with open(path) as fh:
        for line in fh:
            if not line.strip():
                continue
            row = json.loads(line)
            messages = [
                {"role": m["role"], "content": m["content"]}
                for m in row["responses_create_params"]["input"]
                if isinstance(m.get("content"), str)
            ]
            # Rendered to text, then tokenized without special tokens: as vLLM's chat endpoints do.
            text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
            prompt = tokenizer(text, add_special_tokens=False)["input_ids"]
            answer = tokenizer(row["expected_judgement"], add_special_tokens=False)["input_ids"]
            out.append((list(prompt), answer + [tokenizer.eos_token_id]))
    return out


def batch(items: list[tuple[list[int], list[int]]], pad: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Right-padded ids, attention mask, and labels that score the answers only."""
    width = max(len(p) + len(a) for p, a in items)
    ids = torch.full((len(items), width), pad, dtype=torch.long)
    mask = torch.zeros((len(items), width), dtype=torch.long)
    labels = torch.full((len(items), width), -100, dtype=torch.long)
    for i, (prompt, answer) in enumerate(items):
        seq = prompt + answer
        ids[i, : len(seq)] = torch.tensor(seq)
        mask[i, : len(seq)] = 1
        labels[i, len(prompt) : len(seq)] = torch.tensor(answer)
    return ids, mask, labels


def answer_loss(model, ids: torch.Tensor, mask: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of the answers' tokens, each predicted from the position before it. The
    vocabulary head runs on those few positions only: over every prompt token it would be a third
    of each step's time for nothing."""
    hidden = model.model(input_ids=ids, attention_mask=mask).last_hidden_state
    rows, cols = torch.nonzero(labels[:, 1:] != -100, as_tuple=True)
    logits = model.lm_head(hidden[rows, cols])
    return torch.nn.functional.cross_entropy(logits, labels[rows, cols + 1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("prepared")
    ap.add_argument("out")
    ap.add_argument("--steps", default="0,30,80", help="the steps to keep (comma-separated)")
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    keep = sorted({int(s) for s in args.steps.split(",")})

    torch.manual_seed(args.seed)
    torch.set_num_threads(max(1, (os.cpu_count() or 1)))
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    model = LlamaForCausalLM.from_pretrained(args.model, torch_dtype=torch.float32)
    items = examples(args.prepared, tokenizer)
    ids, mask, labels = batch(items, tokenizer.pad_token_id)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.0)
    os.makedirs(args.out, exist_ok=True)
    losses = {}
    model.train()
    for step in range(0, keep[-1] + 1):
        if step in keep:
            save_model_dir(os.path.join(args.out, f"step-{step}"), tokenizer, model)
        if step == keep[-1]:
            break
        loss = answer_loss(model, ids, mask, labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses[step + 1] = round(loss.item(), 4)
    print(
        json.dumps(
            {
                "out": os.path.abspath(args.out),
                "rows": len(items),
                "kept": keep,
                "loss": {s: losses.get(s) for s in keep[1:]},
            }
        )
    )


if __name__ == "__main__":
    main()
