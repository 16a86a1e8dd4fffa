"""`latencyd run` for the Python benches: started on a configuration file,
found by the address it logs, and read over its HTTP API.
host_reread.py and observe_cost.py use it."""

import re
import subprocess
import sys
import time
import urllib.request


def start(latencyd, config):
    """Runs `latencyd run --config CONFIG` (which should listen on port 0);
    (process, address) once it logs where it serves. Ends the bench if it
    does not within 15 s."""
    proc = subprocess.Popen(
        [latencyd, "run", "--config", config],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.time() + 15
    while time.time() < deadline:
        found = re.search(r"serving https?://([0-9.:\[\]]+)", proc.stderr.readline())
        if found:
            return proc, found.group(1)
    proc.kill()
    sys.exit("latencyd did not start")


def get(addr, path):
    with urllib.request.urlopen(f"http://{addr}{path}", timeout=5) as r:
        return r.read().decode()
