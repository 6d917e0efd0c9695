"""Qwen3-ASR's audio encoder (docs/asr_reference.md, section e): log-mel frames in 1 s chunks through three stride-2
convolutions, 13 tokens a second with positions restarting in every chunk, transformer layers attending within
8 s blocks, then a projection to the decoder's width. One clip at a time, as the official code encodes them: a
chunk's zero padding reaches its last tokens through the convolutions, so a clip's tokens depend on its own chunking
only. Nothing crosses a block, so each block is encoded on its own (`encode_block`): a live stream's finished blocks
are encoded once (`model/asr/streaming.py`).

The blocks are the ones the official flash-attention and vLLM paths attend within. Its CPU path (sdpa) attends
across the whole clip instead, so for clips over 8 s (104 tokens) the two official paths differ, and this one
follows the blocks."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ..layers import padding_indices

CHUNK_TOKENS = 13  # tokens of a whole chunk (100 mel frames) after the convolutions


@dataclass(frozen=True)
class AudioEncoderConfig:
    mel_bins: int
    width: int  # d_model
    layers: int
    heads: int
    ffn: int
    conv_channels: int  # downsample_hidden_size
    output_width: int  # the decoder's hidden size
    window: int  # n_window: a chunk is 2 * window mel frames
    window_infer: int  # n_window_infer: mel frames of an attention block
    max_positions: int

    @classmethod
    def parse(cls, audio_config: dict[str, Any]) -> AudioEncoderConfig:
        return cls(
            mel_bins=audio_config["num_mel_bins"],
            width=audio_config["d_model"],
            layers=audio_config["encoder_layers"],
            heads=audio_config["encoder_attention_heads"],
            ffn=audio_config["encoder_ffn_dim"],
            conv_channels=audio_config["downsample_hidden_size"],
            output_width=audio_config["output_dim"],
            window=audio_config["n_window"],
            window_infer=audio_config["n_window_infer"],
            max_positions=audio_config["max_source_positions"],
        )

    @property
    def chunk_frames(self) -> int:
        return 2 * self.window


def chunk_tokens(frames: int) -> int:
    """Tokens three stride-2 convolutions (kernel 3, padding 1) leave of `frames` mel frames."""
    for _ in range(3):
        frames = (frames + 1) // 2
    return frames


def audio_tokens(frames: int, chunk_frames: int = 100) -> int:
    """The tokens of a clip of `frames` mel frames: 13 a whole chunk, and the tail chunk's own. The prompt holds
    this many audio placeholders."""
    return (frames // chunk_frames) * chunk_tokens(chunk_frames) + chunk_tokens(frames % chunk_frames)


def sinusoid_positions(length: int, channels: int) -> torch.Tensor:
    """[length, channels]: sines of every position at geometrically spaced rates from 1 to 1/10000, then the cosines
    (float32, computed in the order the official table is)."""
    rates = torch.exp(-(math.log(10000) / (channels // 2 - 1)) * torch.arange(channels // 2).float())
    angles = torch.arange(length)[:, None] * rates[None, :]
    return torch.cat([torch.sin(angles), torch.cos(angles)], dim=1)


class EncoderAttention(nn.Module):
    def __init__(self, width: int, heads: int):
        super().__init__()
        self.heads = heads
        self.q_proj = nn.Linear(width, width)
        self.k_proj = nn.Linear(width, width)
        self.v_proj = nn.Linear(width, width)
        self.out_proj = nn.Linear(width, width)

    def forward(self, hidden: torch.Tensor, blocks: PackedBlocks | None = None) -> torch.Tensor:
        """Bidirectional attention of [tokens, width]: one attention block's tokens, or several blocks packed end
        to end (`blocks`), each attending within itself."""
        tokens, width = hidden.shape

        def heads_first(states: torch.Tensor) -> torch.Tensor:
            return states.reshape(tokens, self.heads, -1).transpose(0, 1).unsqueeze(0)

        query, key, value = (heads_first(projection(hidden)) for projection in (self.q_proj, self.k_proj, self.v_proj))
        scale = (width // self.heads) ** -0.5
        if blocks is None:
            attended = F.scaled_dot_product_attention(query, key, value, scale=scale)
        else:
            attended = blocks.attend(query, key, value, scale)
        return self.out_proj(attended.squeeze(0).transpose(0, 1).reshape(tokens, width))


class PackedBlocks:
    """Attention blocks of several clips packed end to end, and how their attention runs: per block, as a block
    alone runs (a CPU kernel's sums over another length would change a clip's last bits), or on CUDA in one call
    over the blocks padded to the longest, the padding masked out of every block's keys."""

    def __init__(self, lengths: list[int], device: torch.device, padded: bool | None = None):
        self.lengths = lengths
        self.starts = list(itertools.accumulate(lengths, initial=0))
        self.padded = device.type == "cuda" if padded is None else padded
        if self.padded:
            width = max(lengths)
            self.gather, self.scatter = padding_indices(lengths, device)
            self.keys = (torch.arange(width, device=device)[None] < torch.tensor(lengths, device=device)[:, None])[
                :, None, None, :
            ]

    def attend(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, scale: float) -> torch.Tensor:
        """(1, heads, tokens, head size) each -> the blocks' attention outputs, same shape."""
        if self.padded:
            q, k, v = (t[0][:, self.gather].transpose(0, 1) for t in (query, key, value))
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=self.keys, scale=scale)
            out = out.transpose(1, 2).reshape(-1, out.shape[1], out.shape[3])[self.scatter]
            return out.transpose(0, 1)[None]
        return torch.cat(
            [
                F.scaled_dot_product_attention(query[:, :, a:b], key[:, :, a:b], value[:, :, a:b], scale=scale)
                for a, b in itertools.pairwise(self.starts)
            ],
            dim=2,
        )


class EncoderLayer(nn.Module):
    def __init__(self, config: AudioEncoderConfig):
        super().__init__()
        self.self_attn = EncoderAttention(config.width, config.heads)
        self.self_attn_layer_norm = nn.LayerNorm(config.width)
        self.fc1 = nn.Linear(config.width, config.ffn)
        self.fc2 = nn.Linear(config.ffn, config.width)
        self.final_layer_norm = nn.LayerNorm(config.width)

    def forward(self, hidden: torch.Tensor, blocks: PackedBlocks | None = None) -> torch.Tensor:
        hidden = hidden + self.self_attn(self.self_attn_layer_norm(hidden), blocks)
        hidden = hidden + self.fc2(F.gelu(self.fc1(self.final_layer_norm(hidden))))
        if hidden.dtype == torch.float16:  # as the official layer keeps float16 finite
            limit = torch.finfo(torch.float16).max - 1000
            hidden = hidden.clamp(-limit, limit)
        return hidden


class AudioEncoder(nn.Module):
    """Keyed as the checkpoint's `thinker.audio_tower.*`."""

    def __init__(self, config: AudioEncoderConfig):
        super().__init__()
        self.config = config
        channels = config.conv_channels
        self.conv2d1 = nn.Conv2d(1, channels, 3, 2, padding=1)
        self.conv2d2 = nn.Conv2d(channels, channels, 3, 2, padding=1)
        self.conv2d3 = nn.Conv2d(channels, channels, 3, 2, padding=1)
        self.conv_out = nn.Linear(channels * chunk_tokens(config.mel_bins), config.width, bias=False)
        self.layers = nn.ModuleList(EncoderLayer(config) for _ in range(config.layers))
        self.ln_post = nn.LayerNorm(config.width)
        self.proj1 = nn.Linear(config.width, config.width)
        self.proj2 = nn.Linear(config.width, config.output_width)
        self.register_buffer("positions", sinusoid_positions(config.max_positions, config.width), persistent=False)

    @property
    def block_chunks(self) -> int:
        """Whole 1 s chunks of an attention block (8)."""
        return self.config.window_infer // self.config.chunk_frames

    @property
    def block_frames(self) -> int:
        """Mel frames of an attention block (8 s): whole chunks, each block encoded on its own."""
        return self.config.chunk_frames * self.block_chunks

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        """[mel bins, frames] of one clip -> [audio_tokens(frames), output width], an attention block at a time
        (nothing crosses a block: its chunks' convolutions and its attention are its own)."""
        pad_to = min(features.shape[1], self.config.chunk_frames)  # a clip over one chunk pads its tail to a whole one
        return torch.cat([self.encode_block(block, pad_to) for block in features.split(self.block_frames, dim=1)])

    def encode_block(self, features: torch.Tensor, pad_to: int) -> torch.Tensor:
        """[mel bins, frames] of one attention block, its chunks zero-padded to `pad_to` frames -> its tokens."""
        return self.attend(torch.cat(self.convolve(list(features.T.split(self.config.chunk_frames)), pad_to)))

    def convolve(self, chunks: list[torch.Tensor], pad_to: int) -> list[torch.Tensor]:
        """Chunks' [frames, mel bins] (of 1 s; the last may be shorter), each zero-padded to `pad_to` frames, through
        the convolutions -> each chunk's tokens, positions added, before attention. A chunk's tokens are its own:
        the same whichever chunks it is convolved with."""
        padded = torch.stack([F.pad(chunk, (0, 0, 0, pad_to - len(chunk))) for chunk in chunks])
        hidden = padded.transpose(1, 2).unsqueeze(1)  # [chunks, 1, mel, frames]
        for conv in (self.conv2d1, self.conv2d2, self.conv2d3):
            hidden = F.gelu(conv(hidden))
        count, channels, bands, steps = hidden.shape
        hidden = self.conv_out(hidden.permute(0, 3, 1, 2).reshape(count, steps, channels * bands))
        hidden = hidden + self.positions[:steps].to(hidden.dtype)
        return [tokens[: chunk_tokens(len(chunk))] for tokens, chunk in zip(hidden, chunks, strict=True)]

    def attend(self, hidden: torch.Tensor, blocks: PackedBlocks | None = None) -> torch.Tensor:
        """One attention block's convolved tokens [tokens, width] (or several blocks' packed, `blocks`) -> its
        encoder output."""
        for layer in self.layers:
            hidden = layer(hidden, blocks)
        return self.proj2(F.gelu(self.proj1(self.ln_post(hidden))))

    def encode_many(self, clips: list[torch.Tensor], packed: bool | None = None) -> list[torch.Tensor]:
        """Several clips' [mel bins, frames] -> each one's tokens. Packed (None: on CUDA): every chunk of every clip
        through the convolutions in one call per padding length, every block's tokens through the layers'
        projections together, attention within each block: what `forward` gives each clip alone, up to the last
        bits of products over other row counts (on a CPU ~1e-6, which is why a CPU encodes one clip at a time and
        stays bit-exact)."""
        if not (clips[0].is_cuda if packed is None else packed):
            return [self(features) for features in clips]
        blocks: list[tuple[int, list[torch.Tensor]]] = []  # (clip, its chunks) of every block
        by_padding: dict[int, list[tuple[int, int, torch.Tensor]]] = {}  # padding -> (block, chunk, frames)
        for clip, features in enumerate(clips):
            pad_to = min(features.shape[1], self.config.chunk_frames)
            for block in features.split(self.block_frames, dim=1):
                chunks = list(block.T.split(self.config.chunk_frames))
                for index, chunk in enumerate(chunks):
                    by_padding.setdefault(pad_to, []).append((len(blocks), index, chunk))
                blocks.append((clip, chunks))
        convolved: list[list[torch.Tensor]] = [[] for _ in blocks]
        for pad_to, chunks in by_padding.items():
            for (block, _, _), tokens in zip(chunks, self.convolve([c for _, _, c in chunks], pad_to), strict=True):
                convolved[block].append(tokens)  # in order: a block's chunks were listed in order
        tokens = [torch.cat(chunks) for chunks in convolved]
        lengths = [len(block) for block in tokens]
        encoded = self.attend(torch.cat(tokens), PackedBlocks(lengths, tokens[0].device)).split(lengths)
        outputs: list[list[torch.Tensor]] = [[] for _ in clips]
        for (clip, _), block in zip(blocks, encoded, strict=True):
            outputs[clip].append(block)
        return [torch.cat(parts) for parts in outputs]
