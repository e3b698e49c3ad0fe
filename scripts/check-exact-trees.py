"""Whether verify forwards give each tree node plain decoding's bits on this machine, with the real model.

Verifies random trees in one forward, then decodes each node's path one token at a time (plain decoding) from the
same prompt, and counts the tree rows whose logits differ in any bit and those whose argmax differs. With exact
trees on (the default where the load-time checks pass, models/row_invariance.py) both counts should be 0; with
--no-exact-trees they show what block verification rounds differently here.

    python scripts/check-exact-trees.py [--no-exact-trees] [--contexts 60,317,1000] [--sizes 4,8,16,32]
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

import torch

from nestling.daemon.models.kv_cache import new_cache, truncate
from nestling.daemon.runtime import load_runtime
from nestling.daemon.speculative.tree import DraftTree
from nestling.daemon.speculative.verify import verify_tree

TEXT = Path(__file__).resolve().parents[1] / "daemon" / "bench" / "data"  # real code for the prompts


def prompt_ids(tokenizer, length: int) -> list[int]:
    text = "\n".join(p.read_text(encoding="utf-8") for p in sorted(TEXT.iterdir()) if p.is_file())
    return tokenizer(text)["input_ids"][:length]


def random_tree(rng: random.Random, size: int, vocab: list[int]) -> DraftTree:
    parents = [-1] + [rng.randrange(i) for i in range(1, size)]  # parents first, any shape
    depths = [0] * size
    for i in range(1, size):
        depths[i] = depths[parents[i]] + 1
    return DraftTree(tokens=torch.tensor([rng.choice(vocab) for _ in range(size)]), parents=torch.tensor(parents),
                     depths=torch.tensor(depths), log_probs=torch.zeros(size))


def path_logits(target, cache, committed: int, tree: DraftTree, node: int) -> torch.Tensor:
    """Node `node`'s logits from plain decoding: its path fed one token at a time after the committed prompt."""
    path = []
    while node >= 0:
        path.append(node)
        node = int(tree.parents[node])
    for depth, index in enumerate(reversed(path)):
        token = tree.tokens[index].view(1, 1)
        _, logits = target.forward(token, torch.tensor([[committed + depth]]), cache)
    truncate(cache, committed)
    return logits[-1]


def sizes(text: str) -> list[int]:
    """argparse type: a comma-separated list of positive ints."""
    try:
        values = [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected comma-separated whole numbers, e.g. 60,317") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: every number must be 1 or more")
    return values


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--no-exact-trees", action="store_true", help="verify trees as one block (the old way)")
    parser.add_argument("--contexts", type=sizes, default="60,317,1000", help="prompt lengths in tokens")
    parser.add_argument("--sizes", type=sizes, default="4,8,16,32",
                        help="tree sizes (root included; above the exact rows, 32, trees are verified as one block)")
    parser.add_argument("--trees", type=int, default=2, help="random trees per context and size")
    parser.add_argument("--model", default=None)
    args = parser.parse_args()
    runtime = load_runtime(args.model, head="none", exact_trees=not args.no_exact_trees)
    target = runtime.target
    print(f"{runtime.summary()}\nexact rows: {target.exact_rows}")
    rng = random.Random(0)
    contexts = args.contexts
    ids = prompt_ids(target.tokenizer, max(contexts))
    if len(ids) < max(contexts):
        parser.error(f"--contexts: the prompt text ({TEXT}) holds only {len(ids)} tokens")
    vocab = sorted(set(ids))
    rows = bits = flips = 0
    for context in contexts:
        prompt = torch.tensor([ids[:context]])
        cache = new_cache(target.config)
        target.forward(prompt, torch.arange(context)[None], cache, logits_for=slice(-1, None))
        for size in args.sizes:
            for _ in range(args.trees):
                tree = random_tree(rng, size, vocab)
                verified = verify_tree(target, cache, tree, context).logits
                truncate(cache, context)
                for node in range(size):
                    alone = path_logits(target, cache, context, tree, node)
                    rows += 1
                    bits += not torch.equal(verified[node], alone)
                    flips += int(verified[node].argmax()) != int(alone.argmax())
        print(f"context {context}: {rows} tree rows so far, {bits} with other bits, {flips} with another argmax")
    print(f"{bits} of {rows} tree rows differ from plain decoding in any logit bit; {flips} in the argmax")


if __name__ == "__main__":
    main()
