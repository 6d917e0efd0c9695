"""HTTP layer: thin routers, request schemas, the OpenAI error envelope; the speech routes (`speech/`) and the
recognition routes (`recognition/`) side by side over what they share. No torch here."""
