"""tools/gpu/step_trace_summary.py: step kinds, stage medians, engines apart, and clear failures."""
import unittest

from tool_runner import gpu_tool, run_on

SCRIPT = gpu_tool("step_trace_summary.py")

HEADER = ("step,start_ns,schedule,plan,layout,forward,commit,context,stream,propose,retire,rows,sequences,drafted,"
          "model_ms,plain_correction,drafting_correction")


def step(i, start, forward_us, rows, seqs, propose_us=1):
    """A step whose stages take 1 µs each but the forward (forward_us) and the propose (propose_us)."""
    marks, t = [], start
    for stage, us in zip(range(9), [1, 1, 1, forward_us, 1, 1, 1, propose_us, 1]):
        t += us * 1000
        marks.append(t)
    return ",".join(str(x) for x in [i, start] + marks + [rows, seqs, 0, 0.5, 1.0, 1.0])


def run(text, *args):
    return run_on(SCRIPT, text, *args, suffix=".csv")


def trace():
    # Engine 0: three plain steps of 2 sequences (forward 100, 300, 200 µs), a verify, a prefill, a last step;
    # each step starts 1 ms after the one before. Engine 1: two plain steps of 4 sequences.
    lines = [HEADER]
    starts = [10_000_000 + k * 1_000_000 for k in range(6)]
    lines += [step(0, starts[0], 100, 2, 2), step(1, starts[1], 300, 2, 2), step(2, starts[2], 200, 2, 2),
              step(3, starts[3], 400, 10, 2, propose_us=50), step(4, starts[4], 500, 130, 2), step(5, starts[5], 100, 2, 2)]
    lines += [HEADER, step(0, 50_000_000, 120, 4, 4), step(1, 52_000_000, 140, 4, 4)]
    return "\n".join(lines) + "\n"


class StepTraceSummary(unittest.TestCase):
    def rows(self, out):
        return {tuple(l.split()[:2]): l.split() for l in out.splitlines()[1:] if l.split() and l.split()[0].isdigit()}

    def test_kinds_medians_and_shares(self):
        r = run(trace())
        self.assertEqual(r.returncode, 0, r.stderr)
        rows = self.rows(r.stdout)
        plain = rows[("2", "plain")]
        self.assertEqual(plain[2], "3")       # the last step of an engine has no next start: not counted
        self.assertEqual(plain[5], "1000")    # each step 1 ms start to start
        self.assertEqual(plain[9], "200")     # the forward's median of 100, 300, 200 µs
        self.assertEqual(rows[("2", "verify")][13], "50")  # its propose stage
        self.assertEqual(rows[("2", "prefill")][2], "1")
        self.assertEqual(rows[("4", "plain")][5], "2000")  # engine 1's own steps, 2 ms apart
        shares = sum(float(v[4].rstrip("%")) for v in rows.values())
        self.assertAlmostEqual(shares, 100.0, delta=0.5)

    def test_one_engine(self):
        r = run(trace(), "--engine", "1")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(set(self.rows(r.stdout)), {("4", "plain")})
        r = run(trace(), "--engine", "2")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("2 engines", r.stderr)

    def test_prefill_hold_count(self):
        r = run(trace())
        self.assertNotIn("prefill hold", r.stdout)  # a trace without the column
        lines = [HEADER + ",prefill_held"]
        lines += [step(i, 10_000_000 + i * 1_000_000, 100, 2, 2) + ("," + str(int(i in (1, 2)))) for i in range(4)]
        r = run("\n".join(lines) + "\n")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("prefill hold: 2 of 4 steps kept short prefill chunks back", r.stdout)

    def test_not_a_trace(self):
        r = run("1,2,3\n")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("before any header", r.stderr)


if __name__ == "__main__":
    unittest.main()
