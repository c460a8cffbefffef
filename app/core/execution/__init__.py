"""Running the models: prediction, the [CLS]-only path, CUDA graphs, combined requests, a pair, request inputs,
the engine (in process or Ray), worker processes, fair shares."""
