// Plays float32 chunks posted by the page, back to back, on the audio thread. Tells the page when the first
// samples of a run are output and how many it has played (every few render quanta, and whenever it runs dry).

const REPORT_EVERY = 8; // render quanta (128 samples each) between progress reports

class PcmPlayer extends AudioWorkletProcessor {
  constructor() {
    super();
    this.run = 0;
    this.chunks = [];
    this.offset = 0; // into chunks[0]
    this.played = 0;
    this.quanta = 0;
    this.port.onmessage = ({ data }) => {
      if (data.type === "reset") {
        this.run = data.run;
        this.chunks = [];
        this.offset = 0;
        this.played = 0;
      } else if (data.run === this.run) {
        this.chunks.push(data.samples);
      }
    };
  }

  process(_inputs, outputs) {
    const out = outputs[0][0];
    let written = 0;
    while (written < out.length && this.chunks.length) {
      const chunk = this.chunks[0];
      const n = Math.min(out.length - written, chunk.length - this.offset);
      out.set(chunk.subarray(this.offset, this.offset + n), written);
      written += n;
      this.offset += n;
      if (this.offset === chunk.length) {
        this.chunks.shift();
        this.offset = 0;
      }
    }
    if (written) {
      const first = this.played === 0;
      this.played += written;
      this.quanta += 1;
      const dry = !this.chunks.length;
      if (first || dry || this.quanta % REPORT_EVERY === 0) {
        this.port.postMessage({ run: this.run, played: this.played, first, dry });
      }
    }
    return true;
  }
}

registerProcessor("pcm-player", PcmPlayer);
