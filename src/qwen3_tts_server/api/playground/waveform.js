// The audio received so far, drawn as it arrives: one min/max peak per 10 ms, at least 3 s across the canvas
// (longer audio is squeezed to fit), scaled to its loudest peak, the part already played in the accent colour.

const BIN = 240; // samples per peak: 10 ms at 24 kHz
const MIN_BINS = 300; // the canvas spans at least 3 s
const QUIET = 0.05; // quieter audio than this is not scaled up further

export class Waveform {
  constructor(canvas) {
    this.canvas = canvas;
    this.frame = 0;
    new ResizeObserver(() => this.redraw()).observe(canvas);
    this.clear();
  }

  clear() {
    this.mins = [];
    this.maxs = [];
    this.low = Infinity;
    this.high = -Infinity;
    this.inBin = 0;
    this.peak = QUIET;
    this.played = 0;
    this.redraw();
  }

  add(samples) {
    for (const sample of samples) {
      if (sample < this.low) this.low = sample;
      if (sample > this.high) this.high = sample;
      if (Math.abs(sample) > this.peak) this.peak = Math.abs(sample);
      if (++this.inBin === BIN) {
        this.mins.push(this.low);
        this.maxs.push(this.high);
        this.low = Infinity;
        this.high = -Infinity;
        this.inBin = 0;
      }
    }
    this.redraw();
  }

  setPlayed(samples) {
    this.played = samples;
    this.redraw();
  }

  redraw() {
    this.frame ||= requestAnimationFrame(() => {
      this.frame = 0;
      this.draw();
    });
  }

  draw() {
    const { canvas } = this;
    const width = Math.round(canvas.clientWidth * devicePixelRatio);
    const height = Math.round(canvas.clientHeight * devicePixelRatio);
    if (canvas.width !== width || canvas.height !== height) Object.assign(canvas, { width, height });
    const g = canvas.getContext("2d");
    const style = getComputedStyle(canvas);
    const [axis, wave, played] = ["--wave-axis", "--wave", "--wave-played"].map((name) => style.getPropertyValue(name));
    g.clearRect(0, 0, width, height);
    const middle = height / 2;
    const scale = (0.95 * middle) / this.peak;
    g.fillStyle = axis;
    g.fillRect(0, Math.floor(middle), width, 1);
    const bins = this.mins.length;
    const span = Math.max(bins, MIN_BINS);
    const playedBins = this.played / BIN;
    for (let x = 0; x < width; x++) {
      const from = Math.floor((x * span) / width);
      if (from >= bins) break;
      const to = Math.min(bins, Math.max(from + 1, Math.floor(((x + 1) * span) / width)));
      let low = 1;
      let high = -1;
      for (let i = from; i < to; i++) {
        low = Math.min(low, this.mins[i]);
        high = Math.max(high, this.maxs[i]);
      }
      g.fillStyle = from < playedBins ? played : wave;
      g.fillRect(x, middle - high * scale, 1, Math.max(1, (high - low) * scale));
    }
  }
}
