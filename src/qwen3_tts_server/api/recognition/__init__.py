"""The recognition routes: transcriptions, translations, subtitles, and live transcription over WebSockets
(the earlier ASR server's and OpenAI's realtime)."""
