"""Where fetched bytes are stored."""
