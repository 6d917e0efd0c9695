// The transcription panel, shown when the server hosts a Qwen3-ASR model: a recording (a file, or the microphone)
// transcribed with its text shown as it is decoded (the route's server-sent events), then, where an aligner is
// hosted, its words drawn on the recording's waveform at their times.

import { ApiError, api, apiResponse } from "./api.js";
import { live, toggleLive } from "./live.js";
import { Microphone } from "./microphone.js";

const $ = (id) => document.getElementById(id);
const ACCENT = "#2f6fde";

export const asr = { running: false, done: false, deltas: 0, text: "", words: [], error: null, live };
let recognizer = null; // its /v1/models entry
let recorded = null; // a File from the microphone, used instead of the file input's
const microphone = new Microphone(
  (file) => {
    recorded = file;
    $("asr-file").value = "";
    $("asr-record").textContent = "Record again";
    $("asr-source").textContent = `microphone recording (${Math.round(file.size / 1024)} KiB)`;
  },
  (message) => showError(message),
);

/** Show the panel if one of the hosted models (GET /v1/models) is a recogniser. */
export function showTranscription(models) {
  recognizer = models.find((model) => model.kind === "asr") ?? null;
  $("transcription").hidden = !recognizer;
}

async function transcribe(event) {
  event.preventDefault();
  const file = recorded ?? $("asr-file").files[0];
  if (!file) return showError("choose a recording, or record one from the microphone");
  Object.assign(asr, { running: true, done: false, deltas: 0, text: "", words: [], error: null });
  showError(null);
  $("asr-text").textContent = "";
  $("asr-waveform").hidden = true;
  $("transcribe").disabled = true;
  const started = performance.now();
  const elapsed = () => `${Math.round(performance.now() - started)} ms`;
  $("asr-first").textContent = $("asr-total").textContent = "–";
  try {
    const response = await apiResponse("v1/audio/transcriptions", { method: "POST", form: form(file, { stream: "true" }) });
    for await (const data of serverSentEvents(response)) {
      if (data.type === "transcript.text.delta") {
        if (!asr.deltas++) $("asr-first").textContent = elapsed();
        asr.text += data.delta;
      } else if (data.type === "transcript.text.done") {
        asr.text = data.text; // the official reading of what was decoded
        $("asr-total").textContent = elapsed();
      } else if (data.type === "error") {
        throw new ApiError(data.error.message);
      }
      $("asr-text").textContent = asr.text;
    }
    if (recognizer.aligner) {
      const fields = { response_format: "verbose_json", "timestamp_granularities[]": "word" };
      asr.words = (await api("v1/audio/transcriptions", { method: "POST", form: form(file, fields) })).words;
      await drawWords(file, asr.words);
    }
  } catch (error) {
    asr.error = error.message;
    showError(error.message);
  } finally {
    Object.assign(asr, { running: false, done: true });
    $("transcribe").disabled = false;
  }
}

function form(file, fields) {
  const body = new FormData();
  body.append("file", file);
  body.append("model", recognizer.id);
  if ($("asr-language").value) body.append("language", $("asr-language").value);
  for (const [name, value] of Object.entries(fields)) body.append(name, value);
  return body;
}

/** The `data:` objects of a server-sent event stream, as they arrive. */
async function* serverSentEvents(response) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let pending = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    pending += value;
    let end;
    while ((end = pending.indexOf("\n\n")) >= 0) {
      const block = pending.slice(0, end);
      pending = pending.slice(end + 2);
      for (const line of block.split("\n")) if (line.startsWith("data: ")) yield JSON.parse(line.slice(6));
    }
  }
}

/** The recording's waveform (its peaks, 16 kHz mono) with each word boxed and labelled at its time. */
async function drawWords(file, words) {
  const audio = await new OfflineAudioContext(1, 1, 16000).decodeAudioData(await file.arrayBuffer());
  const samples = audio.getChannelData(0);
  const canvas = $("asr-waveform");
  canvas.hidden = false;
  const scale = window.devicePixelRatio || 1;
  canvas.width = canvas.clientWidth * scale;
  canvas.height = canvas.clientHeight * scale;
  const context = canvas.getContext("2d");
  const { width, height } = canvas;
  const seconds = samples.length / audio.sampleRate;
  const peak = samples.reduce((top, sample) => Math.max(top, Math.abs(sample)), 0.05);
  context.fillStyle = "#999";
  const step = samples.length / width;
  for (let x = 0; x < width; x++) {
    let top = 0;
    for (let i = Math.floor(x * step); i < Math.floor((x + 1) * step); i++) top = Math.max(top, Math.abs(samples[i]));
    const bar = (top / peak) * (height / 2 - 14 * scale);
    context.fillRect(x, height / 2 - bar, 1, 2 * bar || 1);
  }
  context.font = `${12 * scale}px sans-serif`;
  for (const word of words) {
    const left = (word.start / seconds) * width;
    const right = Math.max(left + 2, (word.end / seconds) * width);
    context.fillStyle = "rgba(47, 111, 222, 0.2)";
    context.fillRect(left, 0, right - left, height);
    context.fillStyle = ACCENT;
    context.fillText(word.word, left + 2, 12 * scale);
  }
}

function showError(message) {
  $("asr-error").textContent = message ?? "";
  $("asr-error").hidden = !message;
}

$("transcription-form").addEventListener("submit", transcribe);
$("asr-file").addEventListener("change", () => {
  recorded = null;
  $("asr-source").textContent = "";
  $("asr-record").textContent = "Record from the microphone";
});
$("asr-record").addEventListener("click", async () => {
  showError(null);
  await microphone.toggle();
  if (microphone.recording) $("asr-record").textContent = "Stop recording";
});
$("asr-live").addEventListener("click", () => {
  showError(null);
  toggleLive($("asr-language").value, showError);
});
