"""The project's own Qwen3-TTS 12 Hz modules, checkpoint loader and step-wise generation."""
