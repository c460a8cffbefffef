"""The techniques, one per module: saliency, faithfulness, counterfactuals, projections, CKA, attention, attacks,
CheckList, benchmarks, slices, facts, timing, and training the offline pair."""
