"""Benchmarks of the engine (`qwen3-tts-server bench`) and of its peers, each peer in its own process."""
