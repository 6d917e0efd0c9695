"""One Wyoming connection: `describe` answered here, text to speech by its synthesis side (`speech.py`), speech
to text by its recognition side (`recognition.py`). Requests are answered in order. A refused request gets an
`error` event (the API's message and error code); the connection goes on.
"""

from __future__ import annotations

import asyncio
import logging
import time

from wyoming.event import Event
from wyoming.info import Describe
from wyoming.server import AsyncEventHandler

from ..errors import InvalidInputError, TTSError, shown
from ..protocols import Message, WireProtocol
from ..service.speech.realtime import ChannelClosed
from .backend import WyomingBackend
from .info import describe
from .recognition import Transcription
from .refusals import refusal
from .speech import Synthesis, WyomingChannel

log = logging.getLogger(__name__)

RATE, WIDTH, CHANNELS = 24000, 2, 1
OUTPUT = {"response_format": "pcm", "sample_rate": RATE}


WYOMING = WireProtocol(
    "Wyoming (Home Assistant)",
    "TCP WYOMING_PORT (serve --wyoming-port, or qwen3-tts-server wyoming)",
    "The wyoming library's events (a JSON header line, then the data and payload): text to speech, whole or streamed, "
    "and speech to text with transcript chunks while the audio still arrives.",
    (
        Message("describe", "client", "", "answered by `info`: the voices, the languages, the transcribers"),
        Message("synthesize", "client", "`text`, `voice` (`name`, `speaker`, `language`)", "speech for a whole text"),
        Message("synthesize-start", "client", "`voice`", "a streamed synthesis begins"),
        Message("synthesize-chunk", "client", "`text`", "more text; speech starts at the first clause"),
        Message("synthesize-stop", "client", "", "the streamed text is complete"),
        Message("transcribe", "client", "`name`, `language`, `transcript_names`, `transcript_terms`",
                "speech to text (the names and terms are the model's context): the audio follows"),
        Message("audio-start", "client", "`rate`, `width`, `channels`", "the audio to transcribe begins"),
        Message("audio-chunk", "client", "`rate`, `width`, `channels`, payload", "a piece of it"),
        Message("audio-stop", "client", "", "its end: the rest of the transcript follows"),
        Message("info", "server", "`tts`, `asr`", "what the server speaks and hears"),
        Message("audio-start", "server", "`rate`, `width`, `channels`", "speech begins (16-bit mono PCM)"),
        Message("audio-chunk", "server", "payload", "speech as it is made"),
        Message("audio-stop", "server", "", "a synthesis's speech is complete"),
        Message("synthesize-stopped", "server", "", "a streamed synthesis is complete"),
        Message("transcript-start", "server", "`language`", "a transcription's text begins"),
        Message("transcript-chunk", "server", "`text`", "text the later passes keep, only ever appended"),
        Message("transcript", "server", "`text`, `language`", "the whole transcript"),
        Message("transcript-stop", "server", "", "the transcription is complete"),
        Message("error", "server", "`text`, `code`", "an event refused; the connection goes on"),
    ),
)  # fmt: skip


class WyomingHandler(AsyncEventHandler):
    """The events of one connection, answered through a RealtimeSession; leaving it (the client closed the
    connection, or the server stops) cancels every job the connection started, which frees their engine rows."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        backend: WyomingBackend,
        connections: set[asyncio.Task],
    ):
        super().__init__(reader, writer)
        self.backend = backend
        self.connections = connections
        self.channel = WyomingChannel(writer)
        self.synthesis = Synthesis(backend, self.channel)
        self.transcription = Transcription(backend, self.channel.after_queued)

    async def run(self) -> None:
        task = asyncio.current_task()
        assert task is not None
        self.connections.add(task)
        started = time.perf_counter()
        peer = self.writer.get_extra_info("peername")
        try:
            async with self.synthesis.session:
                await super().run()
        except (ChannelClosed, ConnectionError):  # the client left while it was answered
            pass
        except asyncio.IncompleteReadError:  # the client left in the middle of an event
            log.info("wyoming connection from %s: the client left in the middle of an event", peer)
        except (KeyError, TypeError, AttributeError) as exc:  # an event the library could not read: no way to go on
            log.warning("wyoming connection from %s closed: an unreadable event (%r)", peer, exc)
        finally:
            await self.transcription.close()  # left mid-utterance: its session's work stops
            self.connections.discard(task)
            ms = round(1000 * (time.perf_counter() - started), 1)
            log.info("wyoming connection from %s closed", peer, extra={"peer": str(peer), "ms": ms})

    async def handle_event(self, event: Event) -> bool:
        """Answer one event; False (a failure the server logs) closes the connection."""
        try:
            if not isinstance(event.data, dict):
                raise InvalidInputError(f"the data of a {shown(event.type)} event must be an object")
            await self._handle(event)
        except TTSError as exc:
            await self.channel.after_queued([refusal(exc)])
        except ChannelClosed:
            raise
        except Exception:
            log.exception("wyoming: answering a %r event failed; the connection is closed", event.type)
            return False
        return True

    async def _handle(self, event: Event) -> None:
        if Describe.is_type(event.type):
            await self.channel.after_queued([(await describe(self.backend)).event()])
        elif not (await self.synthesis.handle(event) or await self.transcription.handle(event)):
            raise InvalidInputError(f"unknown event type {shown(event.type)}", param="type")
