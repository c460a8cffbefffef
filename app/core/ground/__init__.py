"""The ground: data and datasets, tokens-to-words alignment, the paired tests, caps and validation, errors, paths
and environment, deadlines, kernels, precision and devices."""
