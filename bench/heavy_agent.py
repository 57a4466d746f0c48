"""The demo agent behind a start that costs CPU time, as a released agent's does
(a Node agent loading its bundle: some hundreds of ms): ``python bench/heavy_agent.py
MS`` spends MS ms of CPU (default 400) before it runs ``acp_nvim.demo_agent``.

For the start-up figure against such an agent (decision 0051: the host's own start
overlaps the agent's): ``python -m bench --agent "python bench/heavy_agent.py"``.
"""

from __future__ import annotations

import runpy
import sys
import time

spend = float(sys.argv[1]) / 1000 if len(sys.argv) > 1 else 0.4
start = time.process_time()
while time.process_time() - start < spend:
    pass
sys.argv[1:] = []
runpy.run_module("acp_nvim.demo_agent", run_name="__main__", alter_sys=True)
