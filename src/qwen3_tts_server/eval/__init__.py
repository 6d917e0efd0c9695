"""`qwen3-tts-server eval`: quality measured on the user's own machine, with the server's own models: speech
synthesised and transcribed back (`speech.py`), scored against its text (`scoring.py`), on a fixed, versioned set of
sentences we wrote (`sentences.json`, `sentences.py`), reported as JSON and Markdown (`report.py`)."""
