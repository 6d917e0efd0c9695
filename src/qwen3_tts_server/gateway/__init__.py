"""The gateway: a light process that owns the port and runs the full server as a worker subprocess on demand,
stopping it when idle. Imports neither torch, numpy, fastapi nor pydantic, so an idle box stays small."""
