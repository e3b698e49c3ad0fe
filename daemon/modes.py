"""Decoding modes, simplest first. "spec" is the full policy; the others are its ablations."""

MODE_HELP = {
    "ar": "plain autoregressive decoding (the baseline)",
    "lookup": "prompt-lookup drafting alone (n-gram continuations, up to 10 tokens)",
    "eagle-ref": "EAGLE-2 with the reference fixed tree (top_k 10, depth 7, 60 nodes)",
    "eagle-latency": "EAGLE-2 sized by the measured verification cost, drafting only while it measures faster than "
                     "plain decoding (the draft gate)",
    "eagle-syntax": "EAGLE-2 sized by cost and shaped by the syntax region at the cursor",
    "spec": "the full policy: eagle-syntax plus lookup branches, drafting only while it measures faster than plain "
            "decoding (default)",
}
MODES = tuple(MODE_HELP)

# Peer baselines of `nestling bench --peers` (bench/peers.py runs them; the daemon never decodes this way). Named
# here, with nestling's modes, so the command line can list them without importing torch.
PEER_HELP = {
    "hf-greedy": "peer baseline: transformers' generate, greedy",
    "hf-lookup": "peer baseline: transformers' generate with its prompt-lookup decoding (10 tokens)",
}
PEERS = tuple(PEER_HELP)
