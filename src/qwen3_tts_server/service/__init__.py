"""Services between the API and the engine: speech (`speech/`) and recognition (`recognition/`) side by side,
the health report and the metrics beside them."""
