"""The agent frameworks whose installs would downgrade packages the main venv needs (mcp,
openai, protobuf): scripts/test.sh installs them into a venv of their own,
``.venv-compat`` (requirements.txt beside this file), and runs these tests there as a second
pytest invocation. Elsewhere (the main venv) a module whose framework is absent is not
collected."""

from __future__ import annotations

import importlib.util

FRAMEWORKS = {
    "test_crewai.py": "crewai",
    "test_semantic_kernel.py": "semantic_kernel",
    "test_autogen_agentchat.py": "autogen_agentchat",
    "test_google_adk.py": "google.adk",
}


def _absent(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is None
    except ModuleNotFoundError:  # a parent package (e.g. `google`) absent
        return True


collect_ignore = [path for path, module in FRAMEWORKS.items() if _absent(module)]
