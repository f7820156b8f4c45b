"""tools/gpu/ncu_sass_summary.py: the main loop found by its execution count, shares by class and opcode, the top
instructions with their stall reasons, and a clear failure on a report without the per-instruction table."""
import unittest

from tool_runner import gpu_tool, run_on

SCRIPT = gpu_tool("ncu_sass_summary.py")

HEADER = ('"Address","Source","Warp Stall Sampling (All Samples)","Warp Stall Sampling (Not-issued Samples)",'
          '"# Samples","Instructions Executed","stall_barrier","stall_long_sb","stall_wait","stall_wait (Not Issued)"')
REPORT = "\n".join([
    "==PROF== Connected to process 1",
    '"Kernel Name","matmul"',
    HEADER,
    '"0x7f00","WARPGROUP.DEPBAR.LE gsb0, 0x0","400","390","1","1,000","390","0","10","9"',
    '"0x7f10","FFMA R1, R2, R3, R1","100","50","1","1,000","0","0","50","40"',
    '"0x7f20","FFMA R4, R2, R3, R4","100","50","1","1,000","0","0","50","40"',
    '"0x7f30","@!P0 BRA 0x7f00","210","200","1","1,000","0","200","10","5"',
    '"0x7f40","STG.E.64 [R8], R10","140","130","1","10","0","130","10","0"',
    '"0x7f50","SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [R9], R8","50","40","1","5,000","0","0","50","30"',
    '"0x7f60","EXIT","0","0","0","0","0","0","0","0"',
])


def run(text, *args):
    return run_on(SCRIPT, text, *args, suffix=".csv")


class NcuSassSummary(unittest.TestCase):
    def test_classes_opcodes_and_top(self):
        r = run(REPORT, "--top", "3")
        self.assertEqual(r.returncode, 0, r.stderr)
        out = r.stdout.splitlines()
        # 1,000 samples; the main loop (executed 1,000 times) has 810 of them.
        self.assertEqual(out[0], "1000 warp samples over 7 instructions; the main loop's instructions ran 1000 times")
        self.assertRegex(out[1], r"main loop\s+810\s+81.0 %")
        self.assertRegex(out[2], r"ran fewer times \(tile prologue, epilogue\)\s+140\s+14.0 %")
        self.assertRegex(out[3], r"ran more times \(spin waits\)\s+50\s+5.0 %")
        self.assertRegex(out[4], r"never ran\s+0\s+0.0 %")
        opcodes = out[out.index("by opcode:") + 1:]
        self.assertRegex(opcodes[0], r"WARPGROUP\s+400")
        self.assertRegex(opcodes[1], r"BRA\s+210")  # the predicate is not the opcode
        self.assertRegex(opcodes[2], r"FFMA\s+200")
        top = out[out.index("the 3 instructions with the most samples:") + 1:]
        self.assertEqual(len(top), 3)
        self.assertIn("WARPGROUP.DEPBAR", top[0])
        self.assertIn("barrier 390, wait 10", top[0])
        self.assertIn("long_sb 200", top[1])

    def test_report_without_table_fails_clearly(self):
        r = run("==PROF== nothing profiled\n")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("no per-instruction table", r.stderr)


if __name__ == "__main__":
    unittest.main()
