// Hands the microphone's samples (its first channel, float32) to the page, a render quantum at a time.

class Capture extends AudioWorkletProcessor {
  process(inputs) {
    const channel = inputs[0]?.[0];
    if (channel?.length) this.port.postMessage(channel.slice());
    return true;
  }
}

registerProcessor("capture", Capture);
