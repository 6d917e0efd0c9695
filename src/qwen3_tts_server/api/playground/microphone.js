// One recording from the microphone at a time, as a File (webm/opus, ogg or m4a, whatever the browser records).

export class Microphone {
  /** `done(file)` gets each finished recording; `failed(message)` says why one could not start. */
  constructor(done, failed) {
    this.done = done;
    this.failed = failed;
    this.recorder = null;
  }

  get recording() {
    return this.recorder !== null;
  }

  /** Start a recording, or stop the one under way (its File then goes to `done`). */
  async toggle() {
    if (this.recorder) return this.recorder.stop();
    if (!navigator.mediaDevices?.getUserMedia) return this.failed("the microphone needs a secure page (https, or localhost)");
    let stream;
    try {
      stream = await navigator.mediaDevices.getUserMedia({ audio: true });
    } catch (error) {
      return this.failed(`no microphone: ${error.message}`);
    }
    const parts = [];
    const recorder = (this.recorder = new MediaRecorder(stream));
    recorder.ondataavailable = ({ data }) => parts.push(data);
    recorder.onstop = () => {
      stream.getTracks().forEach((track) => track.stop());
      const type = recorder.mimeType.split(";")[0];
      const extension = { "audio/ogg": "ogg", "audio/mp4": "m4a" }[type] ?? "webm";
      this.recorder = null;
      this.done(new File(parts, `recording.${extension}`, { type }));
    };
    recorder.start();
  }
}
