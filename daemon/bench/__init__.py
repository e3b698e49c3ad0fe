"""`nestling bench`: side-by-side measurement of decoding modes on the same prompts."""
