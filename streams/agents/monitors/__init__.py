"""What a monitor's checks need of the shell: each check's content read in a process of its own."""
