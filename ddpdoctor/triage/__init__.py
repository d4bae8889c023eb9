"""Turning pasted logs and tracebacks into a diagnosis (`ddpdoctor explain`)."""
