//! The suite's report: one line per check per case, `PASS` or `FAIL` and why.

/// The outcome of every check.
#[derive(Default)]
pub(super) struct Report {
    lines: Vec<Line>,
}

struct Line {
    passed: bool,
    case: String,
    check: &'static str,
    detail: String,
}

impl Report {
    /// Records check `check` of `case`: `Ok(what passed)` or `Err(why it failed)`.
    pub(super) fn push(&mut self, case: &str, check: &'static str, result: Result<String, String>) {
        let (passed, detail) = match result {
            Ok(detail) => (true, detail),
            Err(detail) => (false, detail),
        };
        self.lines.push(Line { passed, case: case.to_string(), check, detail });
    }

    pub(super) fn failed(&self) -> usize {
        self.lines.iter().filter(|l| !l.passed).count()
    }

    pub(super) fn print(&self) -> anyhow::Result<()> {
        use std::io::Write;
        let width = self.lines.iter().map(|l| l.case.len()).max().unwrap_or(0).min(48);
        let mut out = std::io::stdout().lock();
        for line in &self.lines {
            let status = if line.passed { "PASS" } else { "FAIL" };
            writeln!(out, "{status}  {:width$}  {}: {}", line.case, line.check, line.detail)?;
        }
        let failed = self.failed();
        writeln!(out, "{} passed, {failed} failed", self.lines.len() - failed)?;
        out.flush()?;
        Ok(())
    }
}
