"""The speech routes: POST /v1/audio/speech and its clone form, the voices, real-time speech over a WebSocket."""
