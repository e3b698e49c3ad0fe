"""A tokenizer for prompt tests: one token per character; the three FIM markers and Qwen's file separator are tokens
of their own."""

FIM = ("<pre>", "<suf>", "<mid>")
MARKERS = {name: 0x10000 + i for i, name in enumerate(FIM + ("<|file_sep|>",))}


class CharTokenizer:
    unk_token_id = None

    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": [ord(c) for c in text]}

    def decode(self, ids, skip_special_tokens=False):
        names = {v: k for k, v in MARKERS.items()}
        return "".join(names.get(i, chr(i) if i < 0x10000 else "") for i in ids)

    def convert_tokens_to_ids(self, token):
        return MARKERS.get(token)
