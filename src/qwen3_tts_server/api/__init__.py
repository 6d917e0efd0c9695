"""HTTP layer: thin routers, request schemas, the OpenAI error envelope. No torch here."""
