"""`ddpdoctor run`'s rank side and judges: a tracer that torchrun starts on every rank
(`python -m ddpdoctor.trace`), records what the user's own script does through pass-through
hooks on public torch APIs into `trace-R.json`, and pure judges that compare the records across
ranks. Importing this package imports no torch."""
