"""Agents: each turns one topic's records into commands or effects, with the core deciding."""
