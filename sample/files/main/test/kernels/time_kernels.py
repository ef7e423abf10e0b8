# Times the decode kernel: here, reads its time from the simulated profile (argv[1]), and
# writes the timing JSON (docs/recipe.md in prgate's repository) to argv[2].
import json
import sys
import tomllib

with open(sys.argv[1], "rb") as f:
    tpot_us = tomllib.load(f)["tpot-ms"] * 1000.0
timings = {"kernels": [{"name": "decode_step",
                        "samples_us": [tpot_us * f for f in (0.99, 1.0, 1.01, 1.0, 0.995)]}]}
with open(sys.argv[2], "w") as f:
    json.dump(timings, f)
print(json.dumps(timings))
