"""Text front end: clause splitting for incremental input (normalisation comes later)."""
