"""Incremental codec decoding: new frames in, their audio out, never re-decoding what came before.

Every stage of the 12 Hz decoder is causal, so each keeps just the state its next input needs:
- a causal convolution keeps the last (kernel - 1) * dilation input samples;
- a transposed convolution keeps the part of its output that the next input still adds to
  (kernel - stride samples), which the offline decode trims from the end;
- each sliding-window attention layer keeps the keys and values of the last window - 1 frames.
Concatenated chunks equal the offline decode of all the codes (up to float rounding, ~1e-7).
Rows with independent histories and positions are decoded together in one batch (on a GPU; one by one on a CPU).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from .codec import (
    CausalConv,
    CausalTransposedConv,
    CodecDecoder,
    CodecTransformer,
    ConvNeXtBlock,
    ResidualUnit,
    SnakeBeta,
    UpsampleBlock,
)


@dataclass
class CodecStreamState:
    """One stream's decoder state: a buffer per stateful module, and how many frames it has decoded."""

    buffers: dict[str, torch.Tensor] = field(default_factory=dict)
    frames: int = 0


@dataclass
class _Pass:
    """One decode of several streams side by side: their state buffers, the frames in the pass (`n`), and, when the
    streams decode different counts (padded to `n` after their own), each one's count (`frames`, (B,))."""

    buffers: dict[str, torch.Tensor]
    n: int
    frames: torch.Tensor | None = None

    def kept(self, joined: torch.Tensor, width: int, dim: int = -1) -> torch.Tensor:
        """The `width` positions of `joined` along `dim` that end where each stream's own input ends: `joined` is
        `width` kept positions followed by the pass's (the last `width` when every stream decodes `n` frames)."""
        if self.frames is None:
            return joined.narrow(dim, joined.shape[dim] - width, width)
        dim %= joined.ndim
        scale = (joined.shape[dim] - width) // self.n  # positions per frame at this stage
        index = self.frames[:, None] * scale + torch.arange(width, device=joined.device)  # (B, width)
        shape = [1] * joined.ndim
        shape[0], shape[dim] = index.shape
        sizes = list(joined.shape)
        sizes[dim] = width
        return joined.gather(dim, index.view(shape).expand(sizes))

    def own(self, x: torch.Tensor) -> torch.Tensor:
        """x (B, C, L) with each stream's padding (past its own frames) zeroed: what follows its input adds nothing
        to a transposed convolution's tail."""
        if self.frames is None:
            return x
        scale = x.shape[-1] // self.n
        return x * (torch.arange(x.shape[-1], device=x.device) < self.frames[:, None] * scale)[:, None].to(x.dtype)


class StreamingCodecDecoder:
    def __init__(self, codec: CodecDecoder):
        self.codec = codec
        self.window = codec.cfg.sliding_window
        self.samples_per_frame = codec.cfg.samples_per_frame
        self._names = {module: name for name, module in codec.named_modules()}

    def new_state(self) -> CodecStreamState:
        """Zero history: exactly the zero padding the offline decode puts before the first frame."""
        param = self.codec.pre_conv.conv.weight
        state = CodecStreamState()
        for name, module in self.codec.named_modules():
            if isinstance(module, CausalConv) and module.left:
                state.buffers[name] = param.new_zeros(1, module.conv.in_channels, module.left)
            elif isinstance(module, CausalTransposedConv) and module.trim:
                state.buffers[name] = param.new_zeros(1, module.conv.out_channels, module.trim)
        for i, layer in enumerate(self.codec.pre_transformer.layers):
            attn = layer.self_attn
            shape = (1, attn.kv_heads, self.window - 1, attn.head_dim)
            state.buffers[f"kv{i}.k"] = param.new_zeros(shape)
            state.buffers[f"kv{i}.v"] = param.new_zeros(shape)
        return state

    @torch.inference_mode()
    def decode(self, states: list[CodecStreamState], codes: torch.Tensor) -> torch.Tensor:
        """Decode the next n frames of each stream: codes (B, n, num_quantizers) -> audio (B, n * 1920). A stream's
        audio never depends on the streams decoded with it: on a CPU, where oneDNN's convolutions round a batch's
        rows by its size (odd and even batches, a single row, differ in the last bits), each stream is decoded
        alone; there the convolutions' arithmetic, not their launches, sets the pace, so little is lost."""
        if codes.device.type == "cpu" and len(states) > 1:
            return torch.cat([self._decode([state], codes[i : i + 1]) for i, state in enumerate(states)])
        return self._decode(states, codes)

    @torch.inference_mode()
    def decode_ragged(self, states: list[CodecStreamState], codes: list[torch.Tensor]) -> list[torch.Tensor]:
        """Decode each stream's next frames, as many as it has (codes[b]: (n_b, num_quantizers)), in one pass: the
        streams padded to the most, each one's state kept where its own frames end. Its audio (n_b * 1920) is what
        `decode` gives it, up to rounding: the GPU's one decode a step for every stream with a chunk due."""
        frames = [len(c) for c in codes]
        if len(set(frames)) == 1:
            return list(self.decode(states, torch.stack(codes)))
        padded = torch.zeros(len(codes), max(frames), codes[0].shape[1], dtype=codes[0].dtype, device=codes[0].device)
        for row, stream_codes in enumerate(codes):
            padded[row, : len(stream_codes)] = stream_codes
        audio = self._decode(states, padded, torch.tensor(frames, device=padded.device))
        return [row[: n * self.samples_per_frame] for row, n in zip(audio, frames, strict=True)]

    def _decode(
        self, states: list[CodecStreamState], codes: torch.Tensor, frames: torch.Tensor | None = None
    ) -> torch.Tensor:
        n = codes.shape[1]
        buffers = {key: torch.cat([s.buffers[key] for s in states]) for key in states[0].buffers}
        run = _Pass(buffers, n, frames)
        positions = torch.tensor([s.frames for s in states], device=codes.device)
        bound = max(s.frames for s in states) + n
        codec = self.codec
        x = codec.quantizer.decode(codes.transpose(1, 2))
        x = self._conv(codec.pre_conv, x, run)
        x = self._transformer(codec.pre_transformer, x.transpose(1, 2), positions, bound, run).transpose(1, 2)
        for transposed, convnext in codec.upsample:
            x = self._convnext(convnext, self._transposed(transposed, x, run), run)
        for stage in codec.decoder:
            x = self._stage(stage, x, run)
        audio = x.clamp(-1, 1)[:, 0]
        counts = [n] * len(states) if frames is None else frames.tolist()
        for row, (state, count) in enumerate(zip(states, counts, strict=True)):
            for key, value in buffers.items():
                state.buffers[key] = value[row : row + 1]
            state.frames += count
        return audio

    def _stage(self, module: nn.Module, x: torch.Tensor, run: _Pass) -> torch.Tensor:
        if isinstance(module, CausalConv):
            return self._conv(module, x, run)
        if isinstance(module, SnakeBeta):
            return module(x)
        if isinstance(module, UpsampleBlock):
            x = self._transposed(module.block[1], module.block[0](x), run)
            for unit in module.block[2:]:
                x = self._residual(unit, x, run)
            return x
        raise TypeError(f"no streaming rule for {type(module).__name__}")

    def _conv(self, conv: CausalConv, x: torch.Tensor, run: _Pass) -> torch.Tensor:
        if not conv.left:
            return conv.conv(x)
        key = self._names[conv]
        extended = torch.cat((run.buffers[key], x), dim=-1)
        run.buffers[key] = run.kept(extended, conv.left)
        return conv.conv(extended)

    def _transposed(self, tconv: CausalTransposedConv, x: torch.Tensor, run: _Pass):
        if not tconv.trim:
            return tconv.conv(x)
        key = self._names[tconv]
        conv = tconv.conv
        raw = F.conv_transpose1d(run.own(x), conv.weight, None, stride=conv.stride[0])
        raw[..., : tconv.trim] += run.buffers[key]
        complete = x.shape[-1] * conv.stride[0]
        run.buffers[key] = run.kept(raw, tconv.trim)
        return raw[..., :complete] + conv.bias[None, :, None]

    def _convnext(self, block: ConvNeXtBlock, x: torch.Tensor, run: _Pass) -> torch.Tensor:
        y = block.norm(self._conv(block.dwconv, x, run).transpose(1, 2))
        y = block.gamma * block.pwconv2(F.gelu(block.pwconv1(y)))
        return x + y.transpose(1, 2)

    def _residual(self, unit: ResidualUnit, x: torch.Tensor, run: _Pass) -> torch.Tensor:
        y = self._conv(unit.conv1, unit.act1(x), run)
        return x + unit.conv2(unit.act2(y))

    def _transformer(
        self,
        model: CodecTransformer,
        x: torch.Tensor,
        positions: torch.Tensor,
        bound: int,
        run: _Pass,
    ) -> torch.Tensor:
        """x (B, n, latent) at frames positions[b] + [0, n): attends to the kept window and the new frames."""
        n, history = x.shape[1], self.window - 1
        x = model.input_proj(x)
        query_pos = positions[:, None] + torch.arange(n, device=x.device)
        key_pos = torch.cat((positions[:, None] - history + torch.arange(history, device=x.device), query_pos), 1)
        offset = query_pos[:, :, None] - key_pos[:, None, :]
        mask = ((key_pos[:, None, :] >= 0) & (offset >= 0) & (offset < self.window))[:, None]
        cos, sin = model.rotary.at(query_pos, bound, x.dtype)
        for i, layer in enumerate(model.layers):
            attn = layer.self_attn
            q, k, v = attn.project(layer.input_layernorm(x), cos, sin)
            keys = torch.cat((run.buffers[f"kv{i}.k"], k), dim=2)
            values = torch.cat((run.buffers[f"kv{i}.v"], v), dim=2)
            run.buffers[f"kv{i}.k"], run.buffers[f"kv{i}.v"] = run.kept(keys, history, 2), run.kept(values, history, 2)
            x = x + layer.self_attn_layer_scale(attn.attend(q, keys, values, mask))
            x = x + layer.mlp_layer_scale(layer.mlp(layer.post_attention_layernorm(x)))
        return model.output_proj(model.norm(x))
