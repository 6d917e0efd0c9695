// The playground: speech over the WebSocket played as it arrives, the voice library, the server's load.
import { api, apiKey, speechSocketUrl } from "./api.js";
import { SAMPLE_RATE, createPlayer, pcmToFloat, wavFile } from "./audio.js";
import { Microphone } from "./microphone.js";
import { asr, showTranscription } from "./transcription.js";
import { Waveform } from "./waveform.js";

const $ = (id) => document.getElementById(id);
const MAX_INPUT = 4096; // characters, as the API counts them
const MAX_SEED = 2 ** 31 - 1;
const SAMPLE_LINE = "Hello, this is how this voice sounds.";
const POLL_MS = { idle: 5000, speaking: 1000 }; // the server panel: each poll is two logged requests

// What a run starts from.
const freshRun = () => ({
  samplesReceived: 0,
  samplesPlayed: 0,
  firstAudioMs: null,
  firstSoundMs: null,
  cancelled: false,
  done: false,
});
// The last run as tests and benchmarks read it (times in ms from the click on Speak).
const state = (window.playground = { model: null, runs: 0, running: false, ...freshRun(), transcription: asr });

const waveform = new Waveform($("waveform"));
let voices = [];
let hosted = []; // the models the server hosts (GET /v1/models without the OpenAI names)
let player = null; // created by the first Speak (a click: browsers start audio only then)
let current = null; // the run whose WebSocket is open
let shown = null; // the run whose result is shown (it may still play after its WebSocket closed)
let finished = null; // the last complete run, for Download
let recording = null; // a File recorded from the microphone

// -- the server: model, voices -------------------------------------------------------------------------

async function loadServer() {
  showError("api-error", null);
  try {
    const [models, voiceList] = await Promise.all([api("v1/models"), api("v1/audio/voices")]);
    hosted = models.data.filter((model) => !model.alias_of && model.kind !== "asr"); // the speakers
    showTranscription(models.data);
    state.model = hosted.find((model) => model.id === $("model").value) ?? hosted[0] ?? null;
    voices = voiceList.data;
  } catch (error) {
    $("model-info").textContent = "";
    showError("api-error", error.message);
    return;
  }
  // A server of recognisers alone speaks nothing: no speech panel, no voice library.
  $("speech").hidden = !state.model;
  if (!state.model) {
    $("library").hidden = true;
    return;
  }
  fillModels();
  showModel(state.model);
  fillVoices();
}

/** The model picker, shown when the server hosts several models: the chosen one speaks (`model` of a request). */
function fillModels() {
  const picker = $("model");
  const label = (model) => `${model.id} · ${TYPE_NAMES[model.type] ?? model.type}`;
  picker.replaceChildren(...hosted.map((model) => option(model.id, label(model))));
  picker.value = state.model.id;
  $("model-row").hidden = hosted.length < 2;
}

function chooseModel() {
  state.model = hosted.find((model) => model.id === $("model").value) ?? state.model;
  showModel(state.model);
  fillVoices();
}

async function reloadVoices(select) {
  voices = (await api("v1/audio/voices")).data;
  fillVoices(select);
}

const TYPE_NAMES = { custom_voice: "CustomVoice", base: "Base (voice cloning)", voice_design: "VoiceDesign" };

function showModel(model) {
  const { type } = model;
  $("model-info").textContent = `${model.id} · ${TYPE_NAMES[type] ?? type}${model.size ? ` · ${model.size}` : ""}`;
  // CustomVoice takes a style instruction (not at 0.6B), VoiceDesign a description of the voice, Base neither.
  const instructions = type === "voice_design" || (type === "custom_voice" && model.size !== "0b6");
  $("instructions-row").hidden = !instructions;
  $("instructions-label").textContent =
    type === "voice_design" ? "Voice description (who speaks, and how)" : "Instructions (speaking style)";
  $("library").hidden = type === "custom_voice";
  $("sample-fields").hidden = type !== "base";
  $("description-fields").hidden = type !== "voice_design";
}

function option(value, label) {
  const element = document.createElement("option");
  element.value = value;
  element.textContent = label;
  return element;
}

function group(label, options) {
  const element = document.createElement("optgroup");
  element.label = label;
  element.append(...options);
  return element;
}

/** The voice picker and the library list, for the model's type. */
function fillVoices(select) {
  const picker = $("voice");
  const previous = select ?? picker.value;
  const type = state.model?.type;
  const library = voices.filter((voice) => voice.object === "audio.voice");
  const speakable = library.filter((voice) => voice.type === (type === "base" ? "audio_sample" : "prompt"));
  const entries = [];
  if (type === "custom_voice") {
    const presets = voices.filter((voice) => voice.type === "preset").map((voice) => option(voice.id, voice.name));
    const aliases = voices
      .filter((voice) => voice.type === "alias")
      .map((voice) => option(voice.id, `${voice.name} (${voice.alias_of})`));
    entries.push(group("Preset speakers", presets), group("OpenAI names", aliases));
  } else {
    if (type === "voice_design") entries.push(option("", "the description below"));
    const own = speakable.map((voice) => option(voice.id, voice.name));
    if (own.length) entries.push(group("Voice library", own));
    else if (type === "base") entries.push(option("", "no voice yet: add one to the library below"));
  }
  picker.replaceChildren(...entries);
  if ([...picker.options].some((entry) => entry.value === previous)) picker.value = previous;
  $("voice-list").replaceChildren(...library.map((voice) => voiceItem(voice, speakable.includes(voice))));
}

function voiceItem(voice, speakable) {
  const item = document.createElement("li");
  item.dataset.voiceId = voice.id;
  const name = document.createElement("strong");
  name.textContent = voice.name;
  const details = document.createElement("span");
  details.className = "muted";
  details.textContent = `${voice.id} · ${voice.mode ?? voice.type}`;
  const play = document.createElement("button");
  play.type = "button";
  play.textContent = "Play";
  play.disabled = !speakable;
  play.title = speakable ? "speak a short line in this voice" : "this model cannot speak this kind of voice";
  play.addEventListener("click", () => speak(SAMPLE_LINE, voice.id));
  const remove = document.createElement("button");
  remove.type = "button";
  remove.textContent = "Delete";
  remove.addEventListener("click", () => deleteVoice(voice));
  item.append(name, details, play, remove);
  return item;
}

// -- speech --------------------------------------------------------------------------------------------

/** The session config for the WebSocket (and, for Download, POST /v1/audio/speech). */
function speechSettings(voice) {
  const settings = {
    speed: Number($("speed").value),
    seed: $("seed").value === "" ? Math.floor(Math.random() * MAX_SEED) : Number($("seed").value),
    normalize: $("normalize").checked,
  };
  if (voice) settings.voice = voice;
  if (hosted.length > 1) settings.model = state.model.id;
  if ($("language").value) settings.language = $("language").value;
  const instructions = $("instructions").value.trim();
  if (!$("instructions-row").hidden && instructions) settings.instructions = instructions;
  return settings;
}

function resetResult() {
  for (const id of ["ttfa", "first-sound", "rtf", "duration", "seed-used"]) $(id).textContent = "–";
  $("spoken").textContent = "";
  $("speech-status").textContent = "";
  showError("speech-error", null);
  waveform.clear();
  Object.assign(state, freshRun());
}

async function speak(text, voice) {
  if (current) return;
  const clickAt = performance.now();
  resetResult();
  if (!text.trim()) return showError("speech-error", "there is no text to speak");
  if (state.model?.type === "base" && !voice) return showError("speech-error", "add a voice to the library first");
  const settings = speechSettings(voice);
  const run = (current = shown = { clickAt, text, settings, chunks: [], spoken: [], configured: false, files: {} });
  state.runs += 1;
  state.running = true;
  finished = null;
  setRunning(true);
  $("seed-used").textContent = String(settings.seed);
  $("speech-status").textContent = "connecting…";
  try {
    player ??= await createPlayer(onPlayed);
    await player.start();
  } catch (error) {
    player = null;
    return end(run, null, `audio cannot play in this browser: ${error.message}`);
  }
  if (current !== run) return; // stopped while the audio started
  const socket = (run.socket = new WebSocket(speechSocketUrl()));
  socket.binaryType = "arraybuffer";
  socket.onopen = () => socket.send(JSON.stringify({ type: "session.update", ...settings }));
  socket.onmessage = ({ data }) => (typeof data === "string" ? onEvent(run, JSON.parse(data)) : onAudio(run, data));
  socket.onclose = ({ code, reason }) => {
    const clean = code === 1000 || code === 1005;
    end(run, null, clean ? null : reason || `the connection was closed (code ${code})`);
  };
}

function onEvent(run, event) {
  switch (event.type) {
    case "session.updated":
      run.configured = true;
      run.socket.send(JSON.stringify({ type: "input_text", text: run.text }));
      $("speech-status").textContent = "speaking…";
      break;
    case "segment.start":
      run.spoken.push(event.spoken_text);
      $("spoken").textContent = run.spoken.join(" ");
      break;
    case "done": {
      const seconds = state.samplesReceived / SAMPLE_RATE;
      const elapsed = (performance.now() - run.clickAt) / 1000;
      if (seconds > 0) {
        $("rtf").textContent = `${(elapsed / seconds).toFixed(2)} (${(seconds / elapsed).toFixed(1)}× real time)`;
      }
      state.done = true;
      finished = run;
      end(run, `done: ${event.segments} segment(s), ${event.usage.output_tokens} frames`);
      break;
    }
    case "cancelled":
      state.cancelled = true;
      end(run, "stopped");
      break;
    case "error":
      showError("speech-error", event.error.message);
      if (!run.configured) end(run, null); // refused config: nothing will be spoken
      break;
  }
}

function onAudio(run, data) {
  if (run !== current || run.stopping) return; // sent before the server took the cancel
  if (state.firstAudioMs === null) {
    state.firstAudioMs = performance.now() - run.clickAt;
    $("ttfa").textContent = `${Math.round(state.firstAudioMs)} ms`;
  }
  run.chunks.push(data);
  const samples = pcmToFloat(data);
  state.samplesReceived += samples.length;
  $("duration").textContent = `${(state.samplesReceived / SAMPLE_RATE).toFixed(2)} s`;
  waveform.add(samples);
  player.push(samples);
}

function onPlayed({ played, first }) {
  if (first && state.firstSoundMs === null) {
    state.firstSoundMs = performance.now() - shown.clickAt;
    $("first-sound").textContent = `${Math.round(state.firstSoundMs)} ms`;
  }
  state.samplesPlayed = played;
  waveform.setPlayed(played);
}

/** The run's WebSocket is done with: status or error shown, buttons back. Only the first call counts. */
function end(run, status, error) {
  if (current !== run) return;
  current = null;
  state.running = false;
  run.socket?.close(1000);
  $("speech-status").textContent = status ?? "";
  if (error) showError("speech-error", error);
  setRunning(false);
}

function stop() {
  player?.stop();
  const run = current;
  if (!run) return;
  if (run.configured && run.socket.readyState === WebSocket.OPEN) {
    run.stopping = true;
    run.socket.send(JSON.stringify({ type: "cancel" })); // the engine drops the row; `cancelled` ends the run
  } else {
    end(run, "stopped");
  }
}

function setRunning(running) {
  $("speak").disabled = running;
  $("stop").disabled = !running && !player;
  $("download").disabled = running || !finished;
}

/** The last complete run in the chosen format: wav and pcm from the audio received (what played), the other
 * formats made again by POST /v1/audio/speech with the same settings and seed. */
async function download() {
  const run = finished;
  const format = $("format").value;
  const button = $("download");
  button.disabled = true;
  try {
    let file;
    if (format === "wav") file = wavFile(run.chunks, SAMPLE_RATE);
    else if (format === "pcm") file = new Blob(run.chunks, { type: "audio/pcm" });
    else {
      const body = { model: "tts-1", input: run.text, voice: "alloy", ...run.settings, response_format: format };
      const request = { method: "POST", json: { ...body, stream: false }, expect: "blob" };
      file = run.files[format] ??= await api("v1/audio/speech", request);
    }
    const link = document.createElement("a");
    link.href = URL.createObjectURL(file);
    link.download = `speech-${run.settings.seed}.${format}`;
    link.click();
    setTimeout(() => URL.revokeObjectURL(link.href), 60_000);
  } catch (error) {
    showError("speech-error", error.message);
  } finally {
    button.disabled = !finished;
  }
}

// -- the voice library ---------------------------------------------------------------------------------

async function addVoice(event) {
  event.preventDefault();
  showError("library-error", null);
  const form = new FormData();
  form.set("name", $("voice-name").value.trim());
  form.set("consent", $("voice-consent").value.trim());
  if (state.model.type === "voice_design") {
    form.set("type", "prompt");
    form.set("prompt", $("voice-description").value.trim());
  } else {
    const sample = recording ?? $("voice-file").files[0];
    if (!sample) return showError("library-error", "choose a recording, or record one");
    form.set("audio_sample", sample, sample.name);
    if ($("voice-transcript").value.trim()) form.set("ref_text", $("voice-transcript").value.trim());
    if ($("voice-mode").value) form.set("mode", $("voice-mode").value);
  }
  const button = $("add-voice");
  button.disabled = true;
  button.textContent = "Adding…";
  try {
    const voice = await api("v1/audio/voices", { method: "POST", form });
    $("voice-form").reset();
    clearRecording();
    await reloadVoices(voice.id);
  } catch (error) {
    showError("library-error", error.message);
  } finally {
    button.disabled = false;
    button.textContent = "Add voice";
  }
}

async function deleteVoice(voice) {
  if (!confirm(`Delete the voice "${voice.name}" (${voice.id})?`)) return;
  showError("library-error", null);
  try {
    await api(`v1/audio/voices/${encodeURIComponent(voice.id)}`, { method: "DELETE" });
    await reloadVoices();
  } catch (error) {
    showError("library-error", error.message);
  }
}

const microphone = new Microphone(
  (file) => {
    clearRecording();
    recording = file;
    const preview = $("recording");
    preview.src = URL.createObjectURL(recording);
    preview.hidden = false;
    $("voice-file").value = "";
    $("record").textContent = "Record again";
  },
  (message) => showError("library-error", message),
);

async function toggleRecording() {
  showError("library-error", null);
  await microphone.toggle();
  if (microphone.recording) $("record").textContent = "Stop recording";
}

function clearRecording() {
  const preview = $("recording");
  if (preview.src) URL.revokeObjectURL(preview.src);
  preview.removeAttribute("src");
  preview.hidden = true;
  recording = null;
  $("record").textContent = "Record from the microphone";
}

// -- the live panel: /health and /metrics --------------------------------------------------------------

/** Prometheus' text format, as name{labels} -> value. */
function parseMetrics(text) {
  const values = {};
  for (const line of text.split("\n")) {
    const match = /^([A-Za-z_:][\w:]*(?:\{[^}]*\})?)\s+(\S+)/.exec(line);
    if (match) values[match[1]] = Number(match[2]);
  }
  return values;
}

function showLive(health, metrics) {
  const gateway = health.gateway; // behind the gateway: its own report, and its worker's (null while stopped)
  const worker = gateway ? health.worker : health;
  $("live-gateway").hidden = !gateway;
  if (gateway) {
    const pid = gateway.worker_pid ? ` (pid ${gateway.worker_pid})` : "";
    $("live-gateway").textContent =
      `Behind the gateway: worker ${gateway.worker}${pid}, ${gateway.starts} start(s), ` +
      `${gateway.in_flight} request(s) in flight`;
  }
  if (!worker) {
    $("live-model").textContent = "worker stopped (starts with the next request)";
    for (const id of ["live-queue", "live-streams", "live-batch", "live-memory"]) $(id).textContent = "–";
    return;
  }
  const { model } = worker;
  $("live-model").textContent = model.device ? `${model.state} on ${model.device} (${model.dtype})` : model.state;
  $("live-queue").textContent = `${worker.queue_depth} waiting (at most ${worker.max_queue_depth})`;
  const paused = worker.paused_streams ? `, ${worker.paused_streams} paused` : "";
  $("live-streams").textContent = `${worker.active_streams}${paused}`;
  const occupancy = metrics.qwen3_tts_batch_occupancy;
  $("live-batch").textContent =
    occupancy === undefined ? "–" : `${Math.round(occupancy * 100)} % of ${worker.max_batch_size} rows`;
  const mib = (bytes) => `${Math.round(bytes / 2 ** 20)} MiB`;
  const gpu = worker.memory.gpu_allocated_bytes;
  $("live-memory").textContent = `${mib(worker.memory.rss_bytes)} RAM${gpu === undefined ? "" : `, ${mib(gpu)} GPU`}`;
}

async function poll() {
  if (!document.hidden) {
    try {
      const [health, metrics] = await Promise.all([api("health"), api("metrics", { expect: "text" })]);
      showLive(health, parseMetrics(metrics));
    } catch (error) {
      $("live-model").textContent = `unreachable: ${error.message}`;
    }
  }
  setTimeout(poll, current ? POLL_MS.speaking : POLL_MS.idle);
}

// -- wiring --------------------------------------------------------------------------------------------

function showError(id, message) {
  $(id).textContent = message ?? "";
  $(id).hidden = !message;
}

function countCharacters() {
  const count = [...$("text").value].length;
  $("char-count").textContent = `${count} / ${MAX_INPUT}`;
  $("char-count").classList.toggle("over", count > MAX_INPUT);
}

$("api-key").value = apiKey.get();
$("api-key").addEventListener("change", () => {
  apiKey.set($("api-key").value.trim());
  loadServer();
});
$("text").addEventListener("input", countCharacters);
$("text").addEventListener("keydown", (event) => {
  if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) $("speech-form").requestSubmit();
});
$("speed").addEventListener("input", () => ($("speed-value").textContent = `${Number($("speed").value).toFixed(2)}×`));
$("speech-form").addEventListener("submit", (event) => {
  event.preventDefault();
  speak($("text").value, $("voice").value);
});
$("stop").addEventListener("click", stop);
$("download").addEventListener("click", download);
$("model").addEventListener("change", chooseModel);
$("voice-form").addEventListener("submit", addVoice);
$("voice-file").addEventListener("change", clearRecording);
$("record").addEventListener("click", toggleRecording);

countCharacters();
loadServer();
poll();
