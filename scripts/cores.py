"""How many pytest-xdist workers `./run test` starts: one per core this process may use, at most 4 (each worker
holds the models its tests load); ALBERT_LENS_TEST_WORKERS chooses another number."""
import os

print(os.environ.get("ALBERT_LENS_TEST_WORKERS") or min(4, len(os.sched_getaffinity(0))))
