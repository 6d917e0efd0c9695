"""The project's own Qwen3 speech models, TTS (tts/) and ASR (asr/), over the parts they share: the Qwen3 decoder
layers, the checkpoint loader, the text tokenizer, the packed quantised linears, device and dtype parsing."""
