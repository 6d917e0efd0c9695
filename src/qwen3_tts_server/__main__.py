"""`python -m qwen3_tts_server`: the `qwen3-tts-server` command."""

import sys

from .cli import main

sys.exit(main())
