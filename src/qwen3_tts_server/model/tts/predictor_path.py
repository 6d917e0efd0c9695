"""What the code predictor's fast paths (fused kernels on CUDA, traces on a CPU) report of themselves."""

from __future__ import annotations


class PredictorPath:
    """A fast path that is off (`off_reason`: never asked for, or cannot run here), or on until it fails (`failure`),
    after which the layer-by-layer passes run."""

    off_reason: str | None = None
    failure: str | None = None

    @property
    def active(self) -> bool:
        return self.off_reason is None and self.failure is None

    @property
    def state(self) -> str:
        """ "on", "off (why)" or "failed (why)"."""
        if self.off_reason is not None:
            return f"off ({self.off_reason})"
        return "on" if self.failure is None else f"failed ({self.failure})"
