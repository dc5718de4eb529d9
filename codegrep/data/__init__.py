"""Tasks (SWE-bench schema), repositories, and the offline default task set."""
