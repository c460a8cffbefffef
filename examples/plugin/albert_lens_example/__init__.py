"""An example albert-lens plugin (docs/plugins.md): `methods.WordLength` (saliency), `generators.REPEAT_WORD`
(a counterfactual generator) and `lengths.LENGTHS` (a capability over a dataset with its own result type)."""
