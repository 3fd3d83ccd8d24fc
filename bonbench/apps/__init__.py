"""Layer 8, apps: what users run: the command line, analysis and reports, the trainer and verifier
training; nothing below imports an app."""
