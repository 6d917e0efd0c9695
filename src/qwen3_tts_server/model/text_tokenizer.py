"""The Qwen2 byte-level BPE text tokenizer, built with `tokenizers` from a checkpoint's vocab.json,
merges.txt and tokenizer_config.json, configured as the official processor configures it."""

from __future__ import annotations

import functools
import json
from pathlib import Path

from tokenizers import AddedToken, Regex, Tokenizer, decoders, normalizers, pre_tokenizers
from tokenizers.models import BPE

from ..errors import CheckpointError

# The Qwen2 pre-tokenisation pattern (contractions, letter runs, single digits, punctuation, newlines).
QWEN2_SPLIT_PATTERN = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
    r"""|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
TOKENIZER_FILES = ("vocab.json", "merges.txt", "tokenizer_config.json")


class TextTokenizer:
    def __init__(self, tokenizer: Tokenizer):
        self._tokenizer = tokenizer

    @classmethod
    def cached(cls, directory: Path) -> TextTokenizer:
        """`from_directory`, built once per directory and file content: building one holds the GIL in stretches
        of ~100 ms, which a serving process must not pay on every model load."""
        try:
            stamp = tuple((name, (directory / name).stat().st_mtime_ns) for name in TOKENIZER_FILES)
        except OSError:
            return cls.from_directory(directory)  # names the missing file
        return _cached_tokenizer(directory.resolve(), stamp)

    @classmethod
    def from_directory(cls, directory: Path) -> TextTokenizer:
        for name in TOKENIZER_FILES:
            if not (directory / name).is_file():
                raise CheckpointError(f"checkpoint {directory} is missing the text tokenizer file {name}")
        vocab = json.loads((directory / "vocab.json").read_text(encoding="utf-8"))
        merges = []
        for line in (directory / "merges.txt").read_text(encoding="utf-8").splitlines():
            if line and not line.startswith("#version"):
                left, right = line.split(" ")
                merges.append((left, right))
        tokenizer = Tokenizer(BPE(vocab=vocab, merges=merges, unk_token=None, fuse_unk=False, byte_fallback=False))
        tokenizer.normalizer = normalizers.NFC()
        tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
            [
                pre_tokenizers.Split(Regex(QWEN2_SPLIT_PATTERN), behavior="isolated", invert=False),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
            ]
        )
        tokenizer.decoder = decoders.ByteLevel()
        config = json.loads((directory / "tokenizer_config.json").read_text(encoding="utf-8"))
        added = sorted(
            ((int(i), entry) for i, entry in (config.get("added_tokens_decoder") or {}).items()), key=lambda x: x[0]
        )
        for token_id, entry in added:
            token = AddedToken(
                entry["content"],
                single_word=entry.get("single_word", False),
                lstrip=entry.get("lstrip", False),
                rstrip=entry.get("rstrip", False),
                normalized=entry.get("normalized", False),
                special=entry.get("special", True),
            )
            tokenizer.add_special_tokens([token]) if token.special else tokenizer.add_tokens([token])
            if tokenizer.token_to_id(entry["content"]) != token_id:
                raise CheckpointError(
                    f"tokenizer_config.json: added token {entry['content']!r} should have id {token_id}, "
                    f"got {tokenizer.token_to_id(entry['content'])}"
                )
        return cls(tokenizer)

    def encode(self, text: str) -> list[int]:
        return self._tokenizer.encode(text, add_special_tokens=False).ids

    def decode(self, ids: list[int], skip_special: bool = False) -> str:
        return self._tokenizer.decode(ids, skip_special_tokens=skip_special)

    def stream_decoder(self, skip_special: bool = False) -> StreamDecoder:
        return StreamDecoder(self._tokenizer, skip_special)

    def token_id(self, token: str) -> int | None:
        return self._tokenizer.token_to_id(token)


class StreamDecoder:
    """Text of ids given one at a time, each step's cost independent of what came before: what an id completes
    ("" while a character's bytes are not all there). The steps joined are `decode` of all the ids, but for a
    character still incomplete at the end."""

    def __init__(self, tokenizer: Tokenizer, skip_special: bool):
        self._tokenizer = tokenizer
        self._stream = decoders.DecodeStream(skip_special_tokens=skip_special)

    def step(self, token: int) -> str:
        return self._stream.step(self._tokenizer, token) or ""


@functools.lru_cache(maxsize=2)
def _cached_tokenizer(directory: Path, stamp: tuple) -> TextTokenizer:
    return TextTokenizer.from_directory(directory)
