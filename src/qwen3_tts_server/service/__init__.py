"""Services between the API and the engine: encoding, text front end, voices."""
