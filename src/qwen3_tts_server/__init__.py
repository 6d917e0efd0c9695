"""Qwen3-TTS Server: an inference engine and OpenAI-compatible server for the Qwen3 speech models (Qwen3-TTS 12 Hz,
Qwen3-ASR and the ForcedAligner)."""

__version__ = "0.1.0"
