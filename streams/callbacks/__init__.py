"""Signed delivery of terminal outcomes to callers' callback URLs."""
