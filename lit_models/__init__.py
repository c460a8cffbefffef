"""LIT adapters over albert-lens's core: model and dataset wrappers and a server factory."""
