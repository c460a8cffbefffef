"""How many pytest-xdist workers `./run test` starts: one per core this process may use, at most 4 (each worker
holds the models its tests load)."""
import os

print(min(4, len(os.sched_getaffinity(0))))
