"""Recognition services: recordings transcribed, live sessions (voice activity, partials, commits), OpenAI's
realtime transcription, subtitles, translation, routing to a hosted ASR model."""
