"""How often a model picks the code a reference model picked, frame by frame: teacher forced along the
reference's frames (its past always), so one early difference does not decide the rest. Shared by
`benchmarks/precision_agreement.py` and the GPU tests (bfloat16 against float32)."""

from __future__ import annotations

import math

import torch

from ..model.tts.fused_predictor import FusedCodePredictor
from ..model.tts.sampling import RowSampling
from ..model.tts.tts_model import Qwen3TTSModel
from .streams import bench_request

AUDIO_CODES = 2048  # codebook entries; the codec vocabulary above them holds control tokens


def greedy_reference(model: Qwen3TTSModel, frames: int) -> torch.Tensor:
    """`frames` frames (frames, groups) of the bench request by plain argmax (no repetition penalty, EOS
    suppressed): what the forced predictions are compared with."""
    greedy = model.sampling(repetition_penalty=1.0).greedy()
    codes = model.generate([bench_request(model)], greedy, max_frames=frames, suppress_eos=True)[0].codes
    return torch.from_numpy(codes)


@torch.inference_mode()
def forced_predictions(model: Qwen3TTSModel, reference: torch.Tensor, fused: bool = False) -> torch.Tensor:
    """Teacher forced along `reference` (frames, groups): this model's argmax for every code, same shape. `fused`:
    codebooks 1-15 from the code predictor's fused kernels (model/tts/fused_predictor.py)."""
    talker, device, dtype = model.talker, model.device, model.dtype
    fused_predictor = FusedCodePredictor(talker.code_predictor) if fused else None
    greedy = RowSampling.build([(False, 1.0, 0, 1.0)], device)
    no_numbers = torch.zeros(1, reference.shape[1] - 1, dtype=torch.float64, device=device)
    prompt = model.prompts.build(bench_request(model))
    frames = reference.shape[0]
    cache = talker.new_cache(1, prompt.prefill.shape[0] + frames + 1, dtype, device)
    hidden = talker.model.prefill(prompt.prefill[None].to(device, dtype), cache, slice(0, 1))[:, -1]
    reference = reference.to(device)
    predicted = torch.empty_like(reference)
    for t in range(frames):
        frame = reference[t]
        predicted[t, 0] = talker.codec_head(hidden)[0, :AUDIO_CODES].argmax()
        groups = iter(range(1, reference.shape[1]))

        def pick(logits: torch.Tensor, t: int = t, groups=groups) -> torch.Tensor:
            group = next(groups)
            predicted[t, group] = logits[0].argmax()
            return reference[t, group][None]

        if fused_predictor is None:
            talker.code_predictor.predict(hidden[:, None], talker.embed_codec(frame[None, :1]), pick)
        else:
            logits: list[torch.Tensor] = []
            embedded = talker.embed_codec(frame[None, :1])
            fused_predictor.predict(hidden[:, None], embedded, greedy, no_numbers, logits, forced=frame[None, 1:])
            predicted[t, 1:] = torch.stack([scores[0].argmax() for scores in logits])
        text = prompt.trailing[t] if t < prompt.trailing.shape[0] else prompt.pad
        inputs = talker.frame_embedding(frame[None]) + text.to(device, dtype)
        hidden = talker.model.decode(inputs, cache, slice(0, 1), span=cache.lengths[0] + 1)[:, 0]
        cache.advance(slice(0, 1), torch.ones(1, dtype=torch.long, device=device), [0])
    return predicted.cpu()


def agreement(predicted: torch.Tensor, reference: torch.Tensor) -> dict:
    same = predicted == reference
    return {
        "codebook0": round(same[:, 0].float().mean().item(), 4),
        "codebooks1_15": round(same[:, 1:].float().mean().item(), 4),
        "all_codes": round(same.float().mean().item(), 4),
        "whole_frames": round(same.all(dim=1).float().mean().item(), 4),
        "per_codebook": [round(value, 4) for value in same.float().mean(dim=0).tolist()],
    }


def snr_db(signal: torch.Tensor, reference: torch.Tensor) -> float:
    noise = (signal - reference).pow(2).sum().item()
    return math.inf if noise == 0 else round(10 * math.log10(reference.pow(2).sum().item() / noise), 1)
