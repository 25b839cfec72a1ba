#!/usr/bin/env python3
"""Generates the deterministic Zipf-distributed text corpus of the word-count benchmark.

    python3 scripts/gen-corpus.py --output target/corpus/zipf-100mb.txt [--megabytes 100] [--seed 42]

Vocabulary: --vocabulary distinct words (default 100,000), each 2 to 12 letters; about 2% of
them carry a non-ASCII letter. Word ranks follow Zipf's law with exponent 1 (the r-th most
frequent word appears with probability proportional to 1/r). Lines hold 8 to 16 words; about a
tenth of the words are capitalised and some are followed by punctuation, so the tokenizer's
lowercasing and splitting are exercised. The same arguments always give the same bytes: only
Python's seeded Mersenne Twister (stable across versions for random() and choices()) is used.
"""

import argparse
import itertools
import os
import random
import sys

LETTERS = "abcdefghijklmnopqrstuvwxyz"
ACCENTED = "éüöäñçø"
PUNCT = [",", ".", ";", ":", "!", "?", " -", "'s"]


def vocabulary(rng, size):
    words, seen = [], set()
    while len(words) < size:
        n = rng.randint(2, 12)
        w = "".join(rng.choice(LETTERS) for _ in range(n))
        if rng.random() < 0.02:
            i = rng.randrange(n)
            w = w[:i] + rng.choice(ACCENTED) + w[i + 1:]
        if w not in seen:
            seen.add(w)
            words.append(w)
    return words


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--output", required=True)
    ap.add_argument("--megabytes", type=float, default=100.0)
    ap.add_argument("--vocabulary", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=42)
    args = ap.parse_args()

    rng = random.Random(args.seed)
    words = vocabulary(rng, args.vocabulary)
    cum = list(itertools.accumulate(1.0 / r for r in range(1, len(words) + 1)))
    target = int(args.megabytes * 1_000_000)
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    written = 0
    with open(args.output + ".tmp", "w", encoding="utf-8", newline="\n") as out:
        while written < target:
            block = []
            for _ in range(2000):
                n = rng.randint(8, 16)
                picked = rng.choices(words, cum_weights=cum, k=n)
                line = []
                for w in picked:
                    r = rng.random()
                    if r < 0.10:
                        w = w.capitalize()
                    elif r < 0.13:
                        w = w + rng.choice(PUNCT)
                    line.append(w)
                block.append(" ".join(line))
            text = "\n".join(block) + "\n"
            out.write(text)
            written += len(text.encode("utf-8"))
    os.replace(args.output + ".tmp", args.output)
    print(f"wrote {written / 1e6:.1f} MB to {args.output}", file=sys.stderr)


if __name__ == "__main__":
    main()
