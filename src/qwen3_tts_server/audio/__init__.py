"""Audio handling: reference intake (and, later, output encoding)."""
