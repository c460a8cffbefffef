"""Loading models safely, the registry of pairs and tasks, and the shipped offline pair."""
