"""tools/gpu/kernel_trace_summary.py: each kernel's cost from the previous kernel's end, its CTAs apart, and the
rows of the trace that are not kernels (the clock row on another clock, the runtime calls) left out."""
import unittest

from tool_runner import gpu_tool, run_on

SCRIPT = gpu_tool("kernel_trace_summary.py")

# Two launches of kA (4 CTAs) and one of kB (8 CTAs, started under PDL before kA ended); then the rows
# tools/gpu/kernel_trace.cpp appends: the clock row (its end is CLOCK_MONOTONIC, not CUPTI's clock) and a
# runtime call (ctas 0).
TRACE = """start_ns,end_ns,ctas,threads,name
1000,2000,4,128,kA
1500,3000,8,128,kB
3500,5000,4,128,kA
900000000000,12,0,0,clock:cupti
1200,1300,0,77,api:cudaLaunchKernel
"""


class KernelTraceSummary(unittest.TestCase):
    def test_costs_and_shares_of_the_kernels_only(self):
        r = run_on(SCRIPT, TRACE)
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        self.assertTrue(lines[0].startswith("3 kernels, span 0.004 ms"), lines[0])
        rows = {l.split()[0]: l.split() for l in lines[2:4]}
        self.assertEqual(rows["kA"][1:4], ["4", "2", "0.003"])  # costs 1 + 2 µs: from the previous kernel's end
        self.assertEqual(rows["kA"][4], "75.0%")
        self.assertEqual(rows["kB"][1:5], ["8", "1", "0.001", "25.0%"])  # 3000 - 2000
        self.assertNotIn("clock", r.stdout)
        self.assertNotIn("api:", r.stdout)

    def test_no_kernels(self):
        r = run_on(SCRIPT, "start_ns,end_ns,ctas,threads,name\n1,2,0,0,clock:cupti\n")
        self.assertEqual(r.returncode, 1)
        self.assertIn("no kernels", r.stdout)


if __name__ == "__main__":
    unittest.main()
