"""Qwen3-TTS Server: an inference engine and OpenAI-compatible server for the Qwen3-TTS 12 Hz models."""

__version__ = "0.1.0"
