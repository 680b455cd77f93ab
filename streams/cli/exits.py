"""The exit codes every command uses (the README's table)."""

EXIT_FAILED = 1  # what was asked failed
EXIT_USAGE = 2  # a mistake in the command or the settings
EXIT_TIMED_OUT = 3
EXIT_INTERRUPTED = 130
