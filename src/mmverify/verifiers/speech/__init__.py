"""Speech verifiers: transcript metrics (WER/CER with Whisper-style normalisation) and other speech checks."""
