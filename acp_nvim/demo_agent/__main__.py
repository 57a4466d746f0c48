from __future__ import annotations

from acp_nvim.demo_agent import main

main()
