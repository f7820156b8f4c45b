"""Shared by the tests of tools/gpu's summary scripts: run one on a report written to a temporary file."""
import os
import subprocess
import sys
import tempfile

SOURCE = os.environ.get("SPECSERVE_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))


def gpu_tool(name):
    """The path of tools/gpu/NAME."""
    return os.path.join(SOURCE, "tools", "gpu", name)


def run_on(script, text, *args, suffix=".csv"):
    """Runs `python3 script FILE args...` where FILE holds text; returns the CompletedProcess (stdout, stderr)."""
    with tempfile.NamedTemporaryFile("w", suffix=suffix, delete=False) as f:
        f.write(text)
    try:
        return subprocess.run([sys.executable, script, f.name, *args], capture_output=True, text=True)
    finally:
        os.unlink(f.name)
