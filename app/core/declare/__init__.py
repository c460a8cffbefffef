"""What the front ends are generated from: the capabilities and their options, plugins' entry points, the
result types."""
