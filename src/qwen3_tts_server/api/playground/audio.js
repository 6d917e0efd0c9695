// Playing the WebSocket's PCM as it arrives, and the PCM as a file.

export const SAMPLE_RATE = 24000; // the WebSocket's PCM: 16-bit little-endian mono

/**
 * A player for float32 chunks at SAMPLE_RATE. `onProgress({played, first, dry})` reports samples output so far
 * in the current run, `first` with the run's first output and `dry` when everything received has played.
 * Call it from a click: browsers let a page start audio only then.
 */
export async function createPlayer(onProgress) {
  const context = new AudioContext({ sampleRate: SAMPLE_RATE, latencyHint: "interactive" });
  if (context.audioWorklet) {
    await context.audioWorklet.addModule(new URL("player-worklet.js", import.meta.url));
    return new WorkletPlayer(context, onProgress);
  }
  // Browsers offer AudioWorklet in secure contexts only (https, localhost): plain http on a LAN gets this.
  return new ScheduledPlayer(context, onProgress);
}

class WorkletPlayer {
  constructor(context, onProgress) {
    this.context = context;
    this.run = 0;
    this.node = new AudioWorkletNode(context, "pcm-player", { numberOfInputs: 0, outputChannelCount: [1] });
    this.node.connect(context.destination);
    this.node.port.onmessage = ({ data }) => {
      if (data.run === this.run) onProgress(data);
    };
  }

  async start() {
    this.stop();
    await this.context.resume();
  }

  push(samples) {
    this.node.port.postMessage({ type: "chunk", run: this.run, samples }, [samples.buffer]);
  }

  stop() {
    this.run += 1;
    this.node.port.postMessage({ type: "reset", run: this.run });
  }
}

/** Without an AudioWorklet: each chunk an AudioBufferSourceNode, scheduled right after the one before. */
class ScheduledPlayer {
  constructor(context, onProgress) {
    this.context = context;
    this.onProgress = onProgress;
    this.sources = new Set();
    this.next = 0; // context time at which the next chunk starts; 0 before the run's first
    this.played = 0;
  }

  async start() {
    this.stop();
    await this.context.resume();
  }

  push(samples) {
    const { context } = this;
    const buffer = context.createBuffer(1, samples.length, SAMPLE_RATE);
    buffer.copyToChannel(samples, 0);
    const source = context.createBufferSource();
    source.buffer = buffer;
    source.connect(context.destination);
    const first = this.next === 0;
    this.next = Math.max(this.next, context.currentTime + 0.02); // after a gap: a little ahead of now
    source.start(this.next);
    if (first) {
      const wait = (this.next - context.currentTime) * 1000;
      setTimeout(() => this.sources.has(source) && this.onProgress({ played: 0, first: true, dry: false }), wait);
    }
    this.next += buffer.duration;
    this.sources.add(source);
    source.onended = () => {
      if (!this.sources.delete(source)) return; // stopped
      this.played += samples.length;
      this.onProgress({ played: this.played, first: false, dry: this.sources.size === 0 });
    };
  }

  stop() {
    const sources = [...this.sources];
    this.sources.clear();
    for (const source of sources) source.stop();
    this.next = 0;
    this.played = 0;
  }
}

/** 16-bit PCM as float32 samples for Web Audio. */
export function pcmToFloat(buffer) {
  const pcm = new Int16Array(buffer);
  const samples = new Float32Array(pcm.length);
  for (let i = 0; i < pcm.length; i++) samples[i] = pcm[i] / 32768;
  return samples;
}

/** A WAV file of 16-bit mono PCM chunks (ArrayBuffers) at `rate`. */
export function wavFile(chunks, rate) {
  const size = chunks.reduce((total, chunk) => total + chunk.byteLength, 0);
  const header = new DataView(new ArrayBuffer(44));
  const text = (offset, value) => [...value].forEach((c, i) => header.setUint8(offset + i, c.charCodeAt(0)));
  text(0, "RIFF");
  header.setUint32(4, 36 + size, true);
  text(8, "WAVEfmt ");
  header.setUint32(16, 16, true); // fmt chunk size
  header.setUint16(20, 1, true); // PCM
  header.setUint16(22, 1, true); // mono
  header.setUint32(24, rate, true);
  header.setUint32(28, rate * 2, true); // bytes per second
  header.setUint16(32, 2, true); // bytes per sample frame
  header.setUint16(34, 16, true); // bits per sample
  text(36, "data");
  header.setUint32(40, size, true);
  return new Blob([header.buffer, ...chunks], { type: "audio/wav" });
}
