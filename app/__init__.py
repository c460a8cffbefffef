"""albert-lens: a BERT and an ALBERT text classifier, side by side."""
__version__ = "0.1.0"
