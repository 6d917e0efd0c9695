// Live transcription from the microphone: its audio as 16-bit PCM at the audio context's rate, streamed to
// WS /ws/transcribe with the server's voice activity on. A partial replaces the one before it; a final (where
// speech stopped, or at Stop) joins the transcript.

import { socketUrl } from "./api.js";

const $ = (id) => document.getElementById(id);

export const live = { running: false, partials: 0, finals: [], partial: "", error: null };
let session = null; // {socket, context, stream}

/** Start a live session, or stop the one under way (its held audio is flushed into a last final first). */
export async function toggleLive(language, failed) {
  if (session) return stop();
  if (!navigator.mediaDevices?.getUserMedia) return failed("the microphone needs a secure page (https, or localhost)");
  let stream;
  try {
    stream = await navigator.mediaDevices.getUserMedia({ audio: { channelCount: 1, echoCancellation: true } });
  } catch (error) {
    return failed(`no microphone: ${error.message}`);
  }
  const context = new AudioContext();
  await context.audioWorklet.addModule(new URL("capture-worklet.js", import.meta.url));
  const url = socketUrl("ws/transcribe");
  url.searchParams.set("sample_rate", String(context.sampleRate));
  url.searchParams.set("use_server_vad", "true");
  if (language) url.searchParams.set("language", language);
  const socket = new WebSocket(url);
  socket.binaryType = "arraybuffer";
  session = { socket, context, stream };
  Object.assign(live, { running: true, partials: 0, finals: [], partial: "", error: null });
  show();
  socket.onmessage = ({ data }) => receive(JSON.parse(data), failed);
  socket.onclose = () => end();
  const capture = new AudioWorkletNode(context, "capture");
  capture.port.onmessage = ({ data }) => {
    if (socket.readyState === WebSocket.OPEN) socket.send(pcm16(data));
  };
  context.createMediaStreamSource(stream).connect(capture);
  $("asr-live").textContent = "Stop live transcription";
}

function receive(message, failed) {
  if (message.code) {
    live.error = message.message;
    failed(message.message);
  } else if (message.is_final) {
    if (message.text) live.finals.push(message.text);
    live.partial = "";
    if (session?.stopping) session.socket.close();
  } else if (message.is_partial) {
    live.partials++;
    live.partial = message.text;
  }
  show();
}

function stop() {
  session.stopping = true;
  session.stream.getTracks().forEach((track) => track.stop());
  session.socket.send(JSON.stringify({ action: "flush" })); // the last final closes the socket
}

function end() {
  if (!session) return;
  session.stream.getTracks().forEach((track) => track.stop());
  session.context.close();
  session = null;
  live.running = false;
  $("asr-live").textContent = "Live from the microphone";
  show();
}

function show() {
  $("asr-live-text").textContent = live.finals.join(" ");
  $("asr-live-partial").textContent = live.partial;
}

/** Float samples in [-1, 1] as 16-bit little-endian PCM. */
function pcm16(samples) {
  const out = new Int16Array(samples.length);
  for (let i = 0; i < samples.length; i++) out[i] = Math.max(-1, Math.min(1, samples[i])) * 32767;
  return out.buffer;
}
