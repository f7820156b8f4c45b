"""tools/gpu/ncu_summary.py: units, totals, ordering, and a clear failure on a report without a summary."""
import unittest

from tool_runner import gpu_tool, run_on

SCRIPT = gpu_tool("ncu_summary.py")

REPORT = """==PROF== Disconnected
  unnamed>::add_kernel(float *, const float *, long) (16, 1, 1)x(256, 1, 1), Device 0, CC 9.0, Invocations 72
    Section: Command line profiler metrics
    ---------------------- ----------- ------- ------- -------
    Metric Name            Metric Unit Minimum Maximum Average
    ---------------------- ----------- ------- ------- -------
    gpu__time_duration.sum          us    2.53    3.10    2.50
  unnamed>::matmul_tc_stream_kernel(tc::Params) (512, 1, 1)x(128, 1, 1), Device 0, CC 9.0, Invocations 2
    Section: Command line profiler metrics
    gpu__time_duration.sum          ms    0.10    0.30    0.20
  unnamed>::argmax_kernel(const float *, long, long, int *) (1, 1, 1)x(512, 1, 1), Device 0, CC 9.0, Invocations 1
    Section: Command line profiler metrics
    gpu__time_duration.sum          ns  900.00  900.00  900.00
"""


def run(text):
    return run_on(SCRIPT, text, suffix=".txt")


class NcuSummary(unittest.TestCase):
    def test_totals_units_and_order(self):
        r = run(REPORT)
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        # 72 x 2.5 us + 2 x 200 us + 1 x 0.9 us = 580.9 us over 75 launches
        self.assertEqual(lines[0], "sum of kernel durations: 581 us over 75 launches")
        self.assertIn("matmul_tc_stream_kernel", lines[1])  # 400 us first
        self.assertIn("512x1x1 / 128", lines[1])
        self.assertIn("add_kernel", lines[2])  # then 180 us
        self.assertIn("argmax_kernel", lines[3])
        self.assertIn("0.90 us", lines[3])

    def test_report_without_summary_fails_clearly(self):
        r = run("==PROF== nothing profiled\n")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("no per-kernel", r.stderr)


if __name__ == "__main__":
    unittest.main()
