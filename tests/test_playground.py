"""The web playground in a real headless Chromium against real servers: speech played through the AudioWorklet
while it is generated, Stop, downloads in the chosen format, the voice library (a file and the microphone) behind
the gateway, a wrong API key, and not one request leaving the machine.

With PLAYGROUND_SCREENSHOTS=docs these tests also save the screenshots in docs/ (playground-*.png)."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import numpy as np
import pytest
import soundfile as sf

from parity_cases import REF_TEXT, write_reference
from qwen3_tts_server.http_contract import UNAUTHORIZED_MESSAGE
from qwen3_tts_server.testing.live_gateway import live_gateway
from qwen3_tts_server.testing.live_server import LiveProcess, live_process
from test_voice_activity import spoken

CHROMIUM = Path("/usr/bin/chromium")
if not CHROMIUM.exists():
    pytest.skip("the playground's tests need Debian's Chromium at /usr/bin/chromium", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api")
expect = sync_api.expect

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--autoplay-policy=no-user-gesture-required",
    "--use-fake-ui-for-media-stream",
    "--use-fake-device-for-media-stream",
]
KEY = "playground-test-key"
AUTH = {"Authorization": f"Bearer {KEY}"}
# Short segments keep the tests quick: the random-weight models speak until their frame budget.
ENV = {"API_KEY": KEY, "MAX_REQUEST_FRAMES": "12"}
LOOPBACK = {"127.0.0.1", "localhost"}
SCREENSHOTS = os.environ.get("PLAYGROUND_SCREENSHOTS")
REF = "ref_16k_mono.wav"
TIMEOUT = 60_000  # ms, for the browser's waits
STATE = "window.playground"


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
    """A speech-like recording (a gliding harmonic tone, syllable by syllable), 2.3 s at 16 kHz."""
    return write_reference(tmp_path_factory.mktemp("reference"), REF)


@pytest.fixture(scope="module")
def playwright() -> Iterator:
    with sync_api.sync_playwright() as running:
        yield running


def launched(playwright, microphone: Path) -> Iterator:
    """Chromium whose fake microphone plays `microphone`, looped."""
    args = [*CHROMIUM_ARGS, f"--use-file-for-fake-audio-capture={microphone}"]
    browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=args)
    yield browser
    browser.close()


@pytest.fixture(scope="module")
def browser(playwright, reference) -> Iterator:
    yield from launched(playwright, reference)


@pytest.fixture(scope="module")
def server(checkpoint_dirs) -> Iterator[LiveProcess]:
    """A CustomVoice model served directly, with an API key."""
    with live_process("serve", checkpoint_dirs["custom_voice"], "--preload-model", env=ENV) as live:
        yield live


@pytest.fixture(scope="module")
def long_speaker(checkpoint_dirs) -> Iterator[LiveProcess]:
    """As `server`, its segments 400 frames long: what it says takes seconds to make, so a Stop always lands while
    the engine is still generating."""
    env = {**ENV, "MAX_REQUEST_FRAMES": "400"}
    with live_process("serve", checkpoint_dirs["custom_voice"], "--preload-model", env=env) as live:
        yield live


@pytest.fixture(scope="module")
def designer(checkpoint_dirs) -> Iterator[LiveProcess]:
    """A VoiceDesign model, no key."""
    with live_process("serve", checkpoint_dirs["voice_design"], "--preload-model", env={**ENV, "API_KEY": ""}) as live:
        yield live


@pytest.fixture(scope="module")
def gateway(checkpoint_dirs) -> Iterator[LiveProcess]:
    """A Base model behind the gateway, with an API key."""
    with live_gateway(checkpoint_dirs["base"], env=ENV) as live:
        yield live


@pytest.fixture
def open_page(browser) -> Iterator[Callable]:
    """`open_page(base, key)`: the playground in a fresh browser context (its own localStorage), the key typed
    into its field. Afterwards the test fails if the page asked for anything off this machine or threw. (Playwright
    routes neither the WebSocket nor the worklet's module: the page's Content-Security-Policy, checked below, keeps
    those on its own origin.)"""
    contexts, outside, errors = [], [], []

    def keep_local(route) -> None:
        if urlsplit(route.request.url).hostname in LOOPBACK:
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort()

    def open_(base: str, key: str = KEY, init_script: str | None = None, in_browser=None):
        context = (in_browser or browser).new_context(viewport={"width": 1280, "height": 900}, accept_downloads=True)
        contexts.append(context)
        context.route("**/*", keep_local)
        if init_script:
            context.add_init_script(init_script)
        page = context.new_page()
        page.set_default_timeout(TIMEOUT)
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(base + "/")
        page.fill("#api-key", key)
        page.press("#api-key", "Tab")  # a change event: the page saves the key and asks the server again
        return page

    yield open_
    for context in contexts:
        context.close()
    assert outside == []
    assert errors == []


def screenshot(page, state: str) -> None:
    if SCREENSHOTS:
        page.screenshot(path=Path(SCREENSHOTS) / f"playground-{state}.png", full_page=True)


def speak(page, text: str) -> dict:
    """Speak `text` with the page's settings; the page's state once it is done and everything played."""
    page.fill("#text", text)
    page.click("#speak")
    page.wait_for_function(f"() => {STATE}.done && {STATE}.samplesPlayed === {STATE}.samplesReceived")
    return page.evaluate(STATE)


def download(page, format: str) -> tuple[np.ndarray, int]:
    page.select_option("#format", format)
    with page.expect_download() as info:
        page.click("#download")
    assert info.value.suggested_filename.endswith("." + format)
    return sf.read(info.value.path(), dtype="int16")


def test_page_and_files_are_served_without_a_key(server):
    with server.client(timeout=30) as client:
        page = client.get("/")
        assert page.status_code == 200 and page.headers["content-type"] == "text/html; charset=utf-8"
        assert page.headers["content-security-policy"].startswith("default-src 'self';")
        assert client.get("/playground").content == page.content
        assert client.get("/playground/", follow_redirects=True).content == page.content
        script = client.get("/playground/app.js")
        assert script.headers["content-type"] == "text/javascript; charset=utf-8"
        assert script.headers["cache-control"] == "no-cache"
        again = client.get("/playground/app.js", headers={"If-None-Match": script.headers["etag"]})
        assert again.status_code == 304 and again.content == b""
        missing = client.get("/playground/nothing.js")
        assert missing.status_code == 404 and "nothing.js" in missing.json()["error"]["message"]
        assert client.get("/v1/models").status_code == 401  # the API itself still needs the key


def test_speech_plays_while_generated_and_downloads(server, open_page):
    page = open_page(server.base)
    expect(page.locator("#model-info")).to_contain_text("CustomVoice")
    expect(page.locator("#api-error")).to_be_hidden()
    expect(page.locator("#voice option[value=vivian]")).to_have_count(1)
    screenshot(page, "idle")

    page.select_option("#voice", "vivian")
    page.fill("#seed", "7")
    state = speak(page, "I have 2 cats.")
    assert state["samplesReceived"] > 0 and state["samplesReceived"] % 1920 == 0  # whole 80 ms frames
    assert 0 < state["firstAudioMs"] <= state["firstSoundMs"]
    expect(page.locator("#ttfa")).to_have_text(re.compile(r"^\d+ ms$"))
    expect(page.locator("#rtf")).to_have_text(re.compile(r"^\d+\.\d\d \("))
    expect(page.locator("#spoken")).to_have_text("I have two cats.")  # segment.start's spoken_text
    expect(page.locator("#speech-status")).to_contain_text("done")
    screenshot(page, "result")

    wav, rate = download(page, "wav")  # the audio received, as it played
    assert rate == 24000 and len(wav) == state["samplesReceived"] and np.abs(wav).max() > 0
    flac, rate = download(page, "flac")  # made again by POST /v1/audio/speech with the same settings and seed
    assert rate == 24000 and np.array_equal(flac, wav)


def test_stop_cancels_the_stream(long_speaker, open_page):
    server = long_speaker
    page = open_page(server.base)
    expect(page.locator("#voice option")).not_to_have_count(0)
    page.fill("#text", ("This is sentence number 12345. " * 140)[:4096])  # 14 segments of 400 frames
    page.click("#speak")
    page.wait_for_function(f"() => {STATE}.samplesPlayed > 0")
    page.click("#stop")
    page.wait_for_function(f"() => {STATE}.cancelled")
    assert not page.evaluate(f"{STATE}.done")
    expect(page.locator("#speech-status")).to_have_text("stopped")
    expect(page.locator("#speak")).to_be_enabled()
    deadline = time.monotonic() + 10
    while server.health()["active_streams"] and time.monotonic() < deadline:  # freed within one engine step
        time.sleep(0.05)
    assert server.health()["active_streams"] == 0
    counts = f"[{STATE}.samplesReceived, {STATE}.samplesPlayed]"
    stopped = page.evaluate(counts)
    page.wait_for_timeout(300)
    assert page.evaluate(counts) == stopped  # nothing more arrives or plays


def test_plays_without_an_audio_worklet(server, open_page):
    """Plain http on a LAN is no secure context, and browsers offer AudioWorklet only in one."""
    hide = "Object.defineProperty(BaseAudioContext.prototype, 'audioWorklet', {get: () => undefined});"
    page = open_page(server.base, init_script=hide)
    expect(page.locator("#voice option")).not_to_have_count(0)
    state = speak(page, "Hello.")
    assert state["samplesPlayed"] > 0 and state["firstSoundMs"] is not None


def test_wrong_key_shows_the_api_error(server, open_page):
    page = open_page(server.base, key="not-the-key")
    expect(page.locator("#api-error")).to_have_text(UNAUTHORIZED_MESSAGE)
    page.click("#speak")
    expect(page.locator("#speech-error")).to_have_text("missing or wrong API key")  # the WebSocket's close
    screenshot(page, "wrong-key")


def test_voice_design_takes_a_description(designer, open_page):
    page = open_page(designer.base, key="")
    expect(page.locator("#model-info")).to_contain_text("VoiceDesign")
    expect(page.locator("#instructions-label")).to_contain_text("Voice description")
    expect(page.locator("#sample-fields")).to_be_hidden()
    page.fill("#instructions", "")
    page.click("#speak")  # no description: the server's error event
    expect(page.locator("#speech-error")).to_contain_text("a VoiceDesign model needs `instructions`")

    page.fill("#voice-name", "Calm")
    page.fill("#voice-description", "A calm, low voice, speaking slowly.")
    page.fill("#voice-consent", "a designed voice")
    page.click("#add-voice")
    expect(page.locator("#voice-list li", has_text="Calm")).to_contain_text("prompt")
    voice_id = page.locator("#voice-list li", has_text="Calm").get_attribute("data-voice-id")
    expect(page.locator("#voice")).to_have_value(voice_id)
    state = speak(page, "Hello.")  # the designed voice's description, no instructions
    assert state["samplesPlayed"] > 0
    assert designer.client().delete(f"/v1/audio/voices/{voice_id}").status_code == 200


def test_a_model_picker_when_several_models_are_hosted(checkpoint_dirs, open_page):
    models = ("--model", str(checkpoint_dirs["voice_design"]))
    with live_process("serve", checkpoint_dirs["custom_voice"], *models, env={**ENV, "API_KEY": ""}) as live:
        page = open_page(live.base, key="")
        expect(page.locator("#model-row")).to_be_visible()
        expect(page.locator("#model option")).to_have_count(2)
        expect(page.locator("#voice")).to_contain_text("vivian")  # the first model, CustomVoice: its presets
        page.select_option("#model", "voice_design")
        expect(page.locator("#instructions-label")).to_contain_text("Voice description")
        page.fill("#instructions", "A bright, quick voice.")
        assert speak(page, "Hello.")["samplesPlayed"] > 0
        with live.client() as http:
            states = {model_id: report["state"] for model_id, report in http.get("/health").json()["models"].items()}
        assert states == {"custom_voice": "unloaded", "voice_design": "ready"}  # the chosen model spoke


def test_voice_library_behind_the_gateway(gateway, open_page, reference, tmp_path):
    page = open_page(gateway.base)
    expect(page.locator("#model-info")).to_contain_text("Base")
    expect(page.locator("#live-gateway")).to_contain_text("worker running")

    # A file that is no audio: the API's own message.
    (tmp_path / "notes.wav").write_bytes(b"not audio at all")
    with httpx.Client(base_url=gateway.base, headers=AUTH, timeout=60) as client:
        refused = client.post(
            "/v1/audio/voices", data={"name": "x"}, files={"audio_sample": ("notes.wav", b"not audio at all")}
        )
    page.fill("#voice-name", "Broken")
    page.fill("#voice-consent", "synthetic test audio")
    page.set_input_files("#voice-file", tmp_path / "notes.wav")
    page.click("#add-voice")
    expect(page.locator("#library-error")).to_have_text(refused.json()["error"]["message"])

    page.fill("#voice-name", "Narrator")
    page.set_input_files("#voice-file", reference)
    page.fill("#voice-transcript", REF_TEXT[REF])
    page.click("#add-voice")
    item = page.locator("#voice-list li", has_text="Narrator")
    expect(item).to_contain_text("in_context")
    expect(page.locator("#library-error")).to_be_hidden()
    voice_id = item.get_attribute("data-voice-id")
    expect(page.locator("#voice")).to_have_value(voice_id)  # the new voice is picked

    state = speak(page, "Words in a cloned voice.")
    assert state["samplesPlayed"] > 0
    screenshot(page, "library")

    item.get_by_role("button", name="Play").click()  # a short line in the voice
    page.wait_for_function(f"() => {STATE}.runs === 2 && {STATE}.done")
    page.once("dialog", lambda dialog: dialog.accept())
    item.get_by_role("button", name="Delete").click()
    expect(item).to_have_count(0)
    with httpx.Client(base_url=gateway.base, headers=AUTH, timeout=60) as client:
        assert voice_id not in [voice["id"] for voice in client.get("/v1/audio/voices").json()["data"]]


def test_voice_recorded_from_the_microphone(gateway, open_page):
    page = open_page(gateway.base)
    expect(page.locator("#model-info")).to_contain_text("Base")
    page.click("#record")
    expect(page.locator("#record")).to_have_text("Stop recording")
    page.wait_for_timeout(2500)
    page.click("#record")
    expect(page.locator("#recording")).to_be_visible()
    page.fill("#voice-name", "Microphone")
    page.fill("#voice-consent", "synthetic test audio")
    page.select_option("#voice-mode", "x_vector")
    page.click("#add-voice")
    item = page.locator("#voice-list li", has_text="Microphone")
    expect(item).to_contain_text("x_vector")
    with httpx.Client(base_url=gateway.base, headers=AUTH, timeout=60) as client:
        assert client.delete(f"/v1/audio/voices/{item.get_attribute('data-voice-id')}").status_code == 200


@pytest.fixture(scope="module")
def listener(both_families) -> Iterator[LiveProcess]:
    """A speech model, a Qwen3-ASR transcriber and its aligner, with an API key."""
    models = ("--model", str(both_families["asr"]), "--model", str(both_families["aligner"]))
    with live_process("serve", both_families["speech"], *models, env=ENV) as live:
        yield live


def test_a_recording_is_transcribed_as_it_is_decoded_with_its_words_on_the_waveform(listener, open_page, reference):
    """A file, then the microphone: the text streams in (deltas), ends as the API's transcript of the same bytes,
    and the aligner's words are drawn; the speech model picker leaves the transcriber out."""
    fields = {"model": "asr", "language": "en", "response_format": "verbose_json", "timestamp_granularities[]": "word"}
    upload = {"file": (REF, reference.read_bytes())}
    expected = httpx.post(
        listener.base + "/v1/audio/transcriptions", headers=AUTH, data=fields, files=upload, timeout=300
    )
    page = open_page(listener.base)
    expect(page.locator("#transcription")).to_be_visible()
    assert page.locator("#model-row").is_hidden()  # one speech model: no picker, the transcriber not in it
    page.select_option("#asr-language", "en")
    page.set_input_files("#asr-file", str(reference))
    page.click("#transcribe")
    page.wait_for_function(f"() => {STATE}.transcription.done")
    result = page.evaluate(f"{STATE}.transcription")
    assert result["error"] is None and result["deltas"] > 0
    assert result["text"] == expected.json()["text"] and result["words"] == expected.json()["words"]
    expect(page.locator("#asr-waveform")).to_be_visible()
    expect(page.locator("#asr-text")).to_have_text(expected.json()["text"])
    screenshot(page, "transcription")
    page.click("#asr-record")
    expect(page.locator("#asr-record")).to_have_text("Stop recording")
    page.wait_for_timeout(1500)
    page.click("#asr-record")
    expect(page.locator("#asr-source")).to_contain_text("microphone recording")
    page.click("#transcribe")
    page.wait_for_function(f"() => {STATE}.transcription.done")
    assert page.evaluate(f"{STATE}.transcription.error") is None


def test_a_server_of_recognisers_alone_shows_the_transcription_panel_only(both_families, open_page, reference):
    with live_process("serve", both_families["asr"], env=ENV) as ear:
        page = open_page(ear.base)
        expect(page.locator("#transcription")).to_be_visible()
        expect(page.locator("#speech")).to_be_hidden()
        expect(page.locator("#library")).to_be_hidden()
        page.set_input_files("#asr-file", str(reference))
        page.click("#transcribe")
        page.wait_for_function(f"() => {STATE}.transcription.done")
        assert page.evaluate(f"{STATE}.transcription.error") is None


@pytest.fixture(scope="module")
def speaking_browser(playwright, tmp_path_factory) -> Iterator:
    """A browser whose fake microphone says a sentence by espeak-ng, then is silent for 1.5 s, over and over."""
    folder = tmp_path_factory.mktemp("sentence")
    sentence = spoken("Turn on the kitchen lights, please.", folder)
    path = folder / "sentence.wav"
    sf.write(path, np.concatenate([sentence, np.zeros(24000, np.float32)]), 16000, subtype="PCM_16")
    yield from launched(playwright, path)


def test_live_transcription_from_the_microphone(listener, open_page, speaking_browser):
    """The sentence streamed to WS /ws/transcribe: a final where the server's voice activity hears it stop, then
    Stop flushes what is held and closes the session."""
    page = open_page(listener.base, in_browser=speaking_browser)
    page.click("#asr-live")
    expect(page.locator("#asr-live")).to_have_text("Stop live transcription")
    page.wait_for_function(f"() => {STATE}.transcription.live.finals.length > 0")
    expect(page.locator("#asr-live-text")).not_to_be_empty()
    screenshot(page, "live")
    page.click("#asr-live")
    page.wait_for_function(f"() => !{STATE}.transcription.live.running")
    live = page.evaluate(f"{STATE}.transcription.live")
    assert live["error"] is None and all(live["finals"])
    expect(page.locator("#asr-live")).to_have_text("Live from the microphone")
