"""Qwen3-ASR and the Qwen3-ForcedAligner: this project's own recognition model code (docs/asr_reference.md)."""
