"""Errors people see. Each message names the field, file or model and what was wrong with it."""


class LensError(Exception):
    """Base of every error the front ends show as a message rather than a traceback."""


class InputError(LensError, ValueError):
    """Bad user input: an empty or missing field, an unknown option."""
