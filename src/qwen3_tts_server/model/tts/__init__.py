"""Qwen3-TTS 12 Hz: this project's own synthesis model code (talker, codec, cloning, prompts, step-wise generation)."""
