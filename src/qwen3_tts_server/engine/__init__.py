"""The engine: one thread owns the model; requests share every decode step and stream 80 ms frames."""
