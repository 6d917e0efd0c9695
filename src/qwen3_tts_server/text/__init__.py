"""The text front end: normalisation, sentence and clause segmentation, language detection (see frontend.py)."""
