"""Tools for building test checkpoints; used by `make-test-model`, the tests and the benchmarks."""
