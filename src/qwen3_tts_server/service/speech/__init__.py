"""Speech services: a synthesis request prepared and answered (output cache, engine), voices and their
library, routing to a hosted TTS model, real-time speech sessions."""
